/* The forward pass's element-wise and per-row operations (ops.h). Compiled for the x86-64
 * baseline with no fused multiply-add, so the bits are the same wherever it runs; the dot
 * products over the cache go through the kernels (src/kern), which keep that promise too. */
#include "model/ops.h"

#include <math.h>
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

void sf_op_rope_table(const struct sf_model *m, uint32_t pos, float *cs)
{
	/* Pair i turns by pos * base^(-2i/n_rot), grown as a running product the way ggml's rope
	 * cache grows it, over the pair's frequency factor, times the linear scale; cos and sin in
	 * double precision, then rounded. */
	uint32_t half = m->cfg.n_rot / 2;
	float theta = (float)pos;
	for (uint32_t i = 0; i < half; i++) {
		float t = m->rope_freqs ? theta / m->rope_freqs[i] : theta;
		t = m->cfg.rope_freq_scale * t;
		cs[2 * i] = (float)cos((double)t);
		cs[2 * i + 1] = (float)sin((double)t);
		theta *= m->rope_theta_scale;
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

void sf_op_attend(const struct sf_model *m, const struct sf_kv *kv, uint32_t layer,
		  uint32_t kvh, const uint16_t *qh, uint32_t n_q, uint32_t n_pos, float *scores,
		  float *out)
{
	uint32_t hd = m->cfg.head_dim, kvd = m->cfg.n_head_kv * hd;
	/* Scores of the group's queries against each page's keys: one multi-row product per
	 * page (each key row read once for the whole group), each score its own dot product. */
	for (uint32_t p0 = 0; p0 < n_pos; p0 += SF_KV_PAGE) {
		uint32_t np = n_pos - p0 < SF_KV_PAGE ? n_pos - p0 : SF_KV_PAGE;
		const uint16_t *k = sf_kv_at(kv, layer, 0, p0) + (size_t)kvh * hd;
		sf_kern_matmul(SF_GGUF_T_F16, hd, k, (size_t)kvd * sizeof(uint16_t), 0, np, qh,
			       (size_t)hd * sizeof(uint16_t), n_q, scores + p0, n_pos);
	}
	double sums[SF_MODEL_MAX_HEADS];
	for (uint32_t b = 0; b < n_q; b++)
		sums[b] = sf_kern_softmax(scores + (size_t)b * n_pos, n_pos, m->cfg.attn_scale);
	/* The weighted values, page by page, each value row read once for the group (the sums
	 * in position order: the bits one position at a time gives). */
	memset(out, 0, (size_t)n_q * hd * sizeof(float));
	for (uint32_t p0 = 0; p0 < n_pos; p0 += SF_KV_PAGE) {
		uint32_t np = n_pos - p0 < SF_KV_PAGE ? n_pos - p0 : SF_KV_PAGE;
		sf_kern_attn_v_f16(out, hd, scores + p0, n_pos, n_q,
				   sf_kv_at(kv, layer, 1, p0) + (size_t)kvh * hd, kvd, np, hd);
	}
	for (uint32_t b = 0; b < n_q; b++) {
		float *o = out + (size_t)b * hd, inv = (float)(1.0 / sums[b]);
		for (uint32_t d = 0; d < hd; d++)
			o[d] *= inv;
	}
}
