/* The choice of instruction set (cpuid once, or forced) and the products' entry points. */
#include "kern/kern_internal.h"

#include <cpuid.h>
#include <math.h>

/* -1 until the first call chooses; read and written atomically (threads may race to choose,
 * and all choose the same). */
static int isa_now = -1;

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

bool sf_kern_isa_supported(enum sf_kisa isa)
{
	unsigned a, b, c, d;
	if (isa == SF_KISA_SCALAR)
		return true;
	if (isa != SF_KISA_AVX2 && isa != SF_KISA_AVX512)
		return false;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return false;
	const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
		   f16c = c & (1u << 29);
	if (!osxsave || !avx || !fma || !f16c)
		return false;
	const uint64_t xcr0 = xgetbv0();
	if ((xcr0 & 0x6) != 0x6) /* the OS saves SSE and AVX state */
		return false;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	const bool avx2 = b & (1u << 5);
	if (isa == SF_KISA_AVX2)
		return avx2;
	const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30),
		   vl = b & (1u << 31), vnni = c & (1u << 11);
	return avx2 && f && dq && bw && vl && vnni && (xcr0 & 0xe0) == 0xe0;
}

enum sf_kisa sf_kern_isa(void)
{
	int isa = __atomic_load_n(&isa_now, __ATOMIC_ACQUIRE);
	if (isa < 0) {
		isa = sf_kern_isa_supported(SF_KISA_AVX512) ? SF_KISA_AVX512
		      : sf_kern_isa_supported(SF_KISA_AVX2) ? SF_KISA_AVX2
							    : SF_KISA_SCALAR;
		__atomic_store_n(&isa_now, isa, __ATOMIC_RELEASE);
	}
	return (enum sf_kisa)isa;
}

const char *sf_kern_isa_name(enum sf_kisa isa)
{
	switch (isa) {
	case SF_KISA_SCALAR:
		return "scalar";
	case SF_KISA_AVX2:
		return "avx2";
	case SF_KISA_AVX512:
		return "avx512";
	}
	return "?";
}

int sf_kern_force_isa(enum sf_kisa isa)
{
	if (!sf_kern_isa_supported(isa))
		return -1;
	__atomic_store_n(&isa_now, (int)isa, __ATOMIC_RELEASE);
	return 0;
}

static const struct sf__kern_set *kern_set(void)
{
	switch (sf_kern_isa()) {
	case SF_KISA_AVX512:
		return &sf__kern_avx512;
	case SF_KISA_AVX2:
		return &sf__kern_avx2;
	case SF_KISA_SCALAR:
		break;
	}
	return &sf__kern_scalar;
}

static sf__matmul_fn *kernel(uint32_t wtype)
{
	if (wtype >= SF_GGUF_T_COUNT)
		return NULL;
	const struct sf__kern_set *set = kern_set();
	return set->mm[wtype] ? set->mm[wtype] : sf__kern_scalar.mm[wtype];
}

/* The packed type's kernel, or NULL for a type that is not one. */
static sf__matmul_x_fn *kernel_x(uint32_t wtype)
{
	if (wtype < SF_GGUF_T_COUNT || wtype >= SF_KT_COUNT)
		return NULL;
	const uint32_t i = wtype - SF_GGUF_T_COUNT;
	const struct sf__kern_set *set = kern_set();
	return set->mx[i] ? set->mx[i] : sf__kern_scalar.mx[i];
}

void sf_kern_matmul(uint32_t wtype, int64_t k, const void *W, size_t w_stride, int64_t r0,
		    int64_t r1, const void *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	if (r1 <= r0 || nb <= 0 || k <= 0 || r0 < 0)
		return;
	sf__matmul_x_fn *fx = kernel_x(wtype);
	if (fx) {
		if (k % sf_kt(wtype)->block == 0)
			fx(k, W, r0, r1, X, x_stride, nb, Y, ldy);
		return;
	}
	sf__matmul_fn *fn = kernel(wtype);
	if (!fn)
		return;
	fn(k, (const uint8_t *)W + (size_t)r0 * w_stride, w_stride, r1 - r0, X, x_stride, nb,
	   Y + r0, ldy);
}

float sf_kern_dot(uint32_t wtype, int64_t k, const void *w, const void *x)
{
	sf__matmul_fn *fn = kernel(wtype);
	sf__matmul_x_fn *fx = kernel_x(wtype);
	if (!fn && !fx)
		return NAN;
	if (k <= 0)
		return 0.0f;
	float y = NAN;
	if (fx) {
		if (k % sf_kt(wtype)->block == 0)
			fx(k, w, 0, 1, x, 0, 1, &y, 1);
	} else {
		fn(k, w, 0, 1, x, 0, 1, &y, 1);
	}
	return y;
}
