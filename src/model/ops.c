/* The forward pass's element-wise and per-row operations (ops.h). Compiled for the x86-64
 * baseline with no fused multiply-add, so the bits are the same wherever it runs; the dot
 * products over the cache go through the kernels (src/kern), which keep that promise too. */
#include "model/ops.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kern/kern.h"


void sf_op_rmsnorm(float *y, const float *x, const float *w, uint32_t n, float eps)
{
	double sum = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += (double)(x[i] * x[i]);
	float mean = (float)(sum / n);
	float scale = 1.0f / sqrtf(mean + eps);
	if (w)
		for (uint32_t i = 0; i < n; i++)
			y[i] = (x[i] * scale) * w[i];
	else
		for (uint32_t i = 0; i < n; i++)
			y[i] = x[i] * scale;
}

void sf_op_rope_table(const struct sf_model *m, const float *ff, bool swa, uint32_t pos,
		      float *cs)
{
	/* Pair i turns by pos * base^(-2i/n_rot), grown as a running product the way ggml's rope
	 * cache grows it, over the pair's frequency factor, times the linear scale; cos and sin in
	 * double precision, then rounded, then times the attention factor (LongRoPE's; 1). The
	 * sliding-window layers have a base and scale of their own (Gemma 2/3, whose files have
	 * no frequency factors; Phi-3's window layers have the global rope). */
	uint32_t half = m->cfg.n_rot / 2;
	float theta = (float)pos;
	float step = swa ? m->rope_theta_scale_swa : m->rope_theta_scale;
	float scale = swa ? m->cfg.rope_freq_scale_swa : m->cfg.rope_freq_scale;
	if (m->cfg.rope_yarn) {
		/* YaRN (ggml's rope_yarn): pair i's angle mixed from the scaled one and the
		 * unscaled one by a ramp over the pairs [lo, hi], cos and sin times the magnitude */
		const float *corr = m->yarn_corr[swa], ms = m->yarn_mscale[swa];
		float span = corr[1] - corr[0] > 0.001f ? corr[1] - corr[0] : 0.001f;
		for (uint32_t i = 0; i < half; i++) {
			float ex = ff ? theta / ff[i] : theta, in = scale * ex;
			float y = ((float)i - corr[0]) / span;
			float mix = 1 - (y < 0 ? 0 : y > 1 ? 1 : y);
			float t = in * (1 - mix) + ex * mix;
			cs[2 * i] = (float)cos((double)t) * ms;
			cs[2 * i + 1] = (float)sin((double)t) * ms;
			theta *= step;
		}
		return;
	}
	float ms = m->cfg.rope_attn_factor;
	for (uint32_t i = 0; i < half; i++) {
		float t = ff ? theta / ff[i] : theta;
		t = scale * t;
		cs[2 * i] = (float)cos((double)t) * ms;
		cs[2 * i + 1] = (float)sin((double)t) * ms;
		theta *= step;
	}
}

void sf_op_rope(const struct sf_model *m, float *x, uint32_t n_heads, const float *cs)
{
	uint32_t hd = m->cfg.head_dim, half = m->cfg.n_rot / 2;
	for (uint32_t h = 0; h < n_heads; h++) {
		float *v = x + (size_t)h * hd;
		for (uint32_t i = 0; i < half; i++) {
			uint32_t a = m->cfg.rope_neox ? i : 2 * i;
			uint32_t b = m->cfg.rope_neox ? i + half : 2 * i + 1;
			float c = cs[2 * i], s = cs[2 * i + 1];
			float x0 = v[a], x1 = v[b];
			v[a] = x0 * c - x1 * s;
			v[b] = x0 * s + x1 * c;
		}
	}
}

void sf_op_swiglu(float *gate, const float *up, uint32_t n)
{
	sf_kern_swiglu(gate, up, n);
}

void sf_op_matmul(const struct sf_gguf_tensor *w, const uint8_t *x, size_t x_row, uint32_t nb,
		  float *y, size_t ldy, unsigned ith, unsigned nth)
{
	uint64_t rows = w->ne[1], k = w->ne[0], lo, hi;
	sf_pool_split(rows, ith, nth, 16, &lo, &hi);
	if (lo >= hi || !nb)
		return;
	sf_kern_matmul(w->type, (int64_t)k, w->data, sf_kt_row_bytes(w->type, (int64_t)k),
		       (int64_t)lo, (int64_t)hi, x, x_row, nb, y, ldy);
}

float sf_op_softplus(float x)
{
	return x > 20.0f ? x : (float)log((double)(1.0f + sf_kern_expf(x)));
}

float sf_op_tanhf(float x)
{
	/* Odd: tanh(-x) = -tanh(x). Below 0.55 its Taylor series to x^21 in double (the next
	 * term under 1e-10 of the value); above, 1 - 2 / (e^2x + 1) in double from our e^2x
	 * (its 2e-7 error moves the result under 1.3 float ulps there, less further out); from 9
	 * on tanh rounds to 1. */
	float a = fabsf(x);
	double r;
	if (!(a == a))
		return x;
	if (a < 0.55f) {
		static const double c[] = { 1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835,
					    -1382.0 / 155925, 21844.0 / 6081075,
					    -929569.0 / 638512875, 6404582.0 / 10854718875.0,
					    -443861162.0 / 1856156927625.0,
					    18888466084.0 / 194896477400625.0 };
		double d = (double)a, d2 = d * d, p = c[10];
		for (int i = 9; i >= 0; i--)
			p = p * d2 + c[i];
		r = d * p;
	} else if (a < 9.0f) {
		r = 1.0 - 2.0 / ((double)sf_kern_expf(2.0f * a) + 1.0);
	} else {
		r = 1.0;
	}
	float t = (float)r;
	return x < 0 ? -t : t;
}

void sf_op_swiglu_oai(float *gate, const float *up, uint32_t n)
{
	const float alpha = 1.702f, limit = 7.0f;
	for (uint32_t i = 0; i < n; i++) {
		float x = limit < gate[i] ? limit : gate[i]; /* std::min's: a NaN passes */
		float y = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
		float glu = x / (1.0f + sf_kern_expf(alpha * (-x)));
		gate[i] = glu * (y + 1.0f);
	}
}

/* ggml's GELU of each half float (its table: the input rounded to F16, GELU's tanh form in
 * float, the result rounded to F16), made once with our tanh. */
static uint16_t gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_init(void)
{
	const float a = 0.044715f, s = 0.79788456080286535587989211986876f;
	for (uint32_t i = 0; i < (1u << 16); i++) {
		float x = sf_f16_to_f32((uint16_t)i);
		float y = 0.5f * x * (1.0f + sf_op_tanhf(s * x * (1.0f + a * x * x)));
		gelu_table[i] = sf_f32_to_f16(y);
	}
}

void sf_op_geglu(float *gate, const float *up, uint32_t n)
{
	pthread_once(&gelu_once, gelu_init);
	for (uint32_t i = 0; i < n; i++) {
		float g = gate[i];
		if (g <= -10.0f)
			gate[i] = 0.0f;
		else if (g >= 10.0f)
			gate[i] = g * up[i];
		else
			gate[i] = sf_f16_to_f32(gelu_table[sf_f32_to_f16(g)]) * up[i];
	}
}

void sf_op_softcap(float *x, uint32_t n, float cap, float scale)
{
	float s = scale / cap;
	for (uint32_t i = 0; i < n; i++)
		x[i] = cap * sf_op_tanhf(x[i] * s);
}

void sf_op_hadamard(float *x, uint32_t n, uint32_t w)
{
	const float s = 1.0f / sqrtf((float)w);
	for (uint32_t c = 0; c < n; c += w) {
		float *y = x + c;
		for (uint32_t h = 1; h < w; h *= 2)
			for (uint32_t i = 0; i < w; i += 2 * h)
				for (uint32_t j = i; j < i + h; j++) {
					float a = y[j], b = y[j + h];
					y[j] = a + b;
					y[j + h] = a - b;
				}
		for (uint32_t i = 0; i < w; i++)
			y[i] *= s;
	}
}

size_t sf_op_query_bytes(const struct sf_model *m)
{
	return m->k_q8 ? sf_kt_row_bytes(SF_GGUF_T_Q8_0, m->cfg.head_dim)
		       : m->cfg.head_dim * sizeof(uint16_t);
}

void sf_op_query_round(const struct sf_model *m, const float *x, void *y, uint32_t n)
{
	sf_kern_quantize_act(m->k_q8 ? SF_GGUF_T_Q8_0 : SF_GGUF_T_F16, x, y, n);
}

void sf_op_attend(const struct sf_model *m, const struct sf_kv *kv, uint32_t layer,
		  uint32_t kvh, const void *q, uint32_t n_q, uint32_t from, uint32_t to,
		  float *scores, float *out)
{
	uint32_t hd = m->cfg.head_dim, kvd = m->cfg.n_head_kv * hd, n = to - from;
	/* gpt-oss: each row one longer, its last the head's sink logit (the scores scaled here,
	 * the softmax's scale 1: the same bits as the softmax scaling them) */
	const float *sink = m->cfg.attn_sinks ? (const float *)m->layers[layer].attn_sinks->data +
							(size_t)kvh * n_q
					      : NULL;
	uint32_t ns = sink ? n + 1 : n; /* a row's stride */
	/* Scores of the group's queries against each page's keys: one multi-row product per
	 * page (each key row read once for the whole group), each score its own dot product
	 * (Q8_0 keys: the page's packed slabs, rows p0 % SF_KV_PAGE on, as Y's columns). */
	size_t qb = sf_op_query_bytes(m);
	for (uint32_t p0 = from; p0 < to; p0 = (p0 / SF_KV_PAGE + 1) * SF_KV_PAGE) {
		uint32_t end = (p0 / SF_KV_PAGE + 1) * SF_KV_PAGE, np = (end < to ? end : to) - p0;
		if (m->k_q8) {
			uint32_t r0 = p0 % SF_KV_PAGE;
			sf_kern_matmul(SF_KT_Q8_0_X16, hd, sf_kv_keys_q8(kv, layer, kvh, p0), 0, r0,
				       r0 + np, q, qb, n_q, scores + (p0 - from) - r0, ns);
			continue;
		}
		const uint16_t *k = sf_kv_at(kv, layer, 0, p0) + (size_t)kvh * hd;
		sf_kern_matmul(SF_GGUF_T_F16, hd, k, (size_t)kvd * sizeof(uint16_t), 0, np, q, qb,
			       n_q, scores + (p0 - from), ns);
	}
	/* Scaled (unless the queries were), soft-capped as ggml's flash attention caps them
	 * (cap * tanh(s * (scale / cap))), then the softmax's numerators. */
	float scale = m->cfg.q_prescale ? 1.0f : m->cfg.attn_scale;
	double sums[SF_MODEL_MAX_HEADS];
	for (uint32_t b = 0; b < n_q; b++) {
		float *s = scores + (size_t)b * ns;
		if (sink) {
			for (uint32_t j = 0; j < n; j++)
				s[j] *= scale;
			s[n] = sink[b];
			sums[b] = sf_kern_softmax(s, n + 1, 1.0f);
		} else if (m->cfg.attn_softcap > 0) {
			sf_op_softcap(s, n, m->cfg.attn_softcap, scale);
			sums[b] = sf_kern_softmax(s, n, 1.0f);
		} else {
			sums[b] = sf_kern_softmax(s, n, scale);
		}
	}
	/* The weighted values, page by page, each value row read once for the group (the sums
	 * in position order: the bits one position at a time gives). */
	memset(out, 0, (size_t)n_q * hd * sizeof(float));
	for (uint32_t p0 = from; p0 < to; p0 = (p0 / SF_KV_PAGE + 1) * SF_KV_PAGE) {
		uint32_t end = (p0 / SF_KV_PAGE + 1) * SF_KV_PAGE, np = (end < to ? end : to) - p0;
		sf_kern_attn_v_f16(out, hd, scores + (p0 - from), ns, n_q,
				   sf_kv_at(kv, layer, 1, p0) + (size_t)kvh * hd, kvd, np, hd);
	}
	for (uint32_t b = 0; b < n_q; b++) {
		float *o = out + (size_t)b * hd, inv = (float)(1.0 / sums[b]);
		for (uint32_t d = 0; d < hd; d++)
			o[d] *= inv;
	}
}
