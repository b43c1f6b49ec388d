#pragma once
// Math written once for float vectors of any width: GCC's vector types, of which __m256
// (AVX2) and __m512 (AVX-512) are two, so one source serves the 8- and the 16-lane
// kernels. A function is instantiated only in the files compiled for the ISA whose
// vectors it takes; what GCC's operators cannot say (a fused multiply-add: -std=c++20
// does not contract a * b + c) comes from one overload per width below.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <cstdint>

namespace shardlm::backends::cpu {

#if defined(__FMA__)
inline __m256 fused_multiply_add(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
#endif
#if defined(__AVX512F__)
inline __m512 fused_multiply_add(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
#endif
#if !defined(__FMA__)
// Without an FMA instruction (the portable table's build): a product and a sum, rounded
// twice; GCC lowers it to whatever vectors the target has.
template <typename F>
inline F fused_multiply_add(F a, F b, F c) {
  return a * b + c;
}
#endif

// e^x for every lane, within 2 ulp of std::exp; x below -87.3 (e^x under FLT_MIN, -inf
// included) gives 0. Cephes' expf: x = n ln 2 + r, |r| <= ln 2 / 2, a degree-6 polynomial
// for e^r, and 2^n built in the exponent bits. n is rounded to nearest (even) by adding
// and subtracting 1.5 * 2^23, exact for |x ln 2| < 2^22.
template <typename F>
inline F exp_lanes(F x) {
  using I = decltype(x < x);  // the signed integer vector of F's lanes
  const I underflow = x < -87.3f;
  x = x < -87.3f ? F{} - 87.3f : x;
  x = x > 88.3f ? F{} + 88.3f : x;
  constexpr float round_to_integer = 12582912.0f;
  const F n = fused_multiply_add(x, F{} + 1.44269504088896341f, F{} + round_to_integer) - round_to_integer;
  F r = fused_multiply_add(-n, F{} + 0.693359375f, x);
  r = fused_multiply_add(-n, F{} - 2.12194440e-4f, r);
  F p = F{} + 1.9875691500e-4f;
  p = fused_multiply_add(p, r, F{} + 1.3981999507e-3f);
  p = fused_multiply_add(p, r, F{} + 8.3334519073e-3f);
  p = fused_multiply_add(p, r, F{} + 4.1665795894e-2f);
  p = fused_multiply_add(p, r, F{} + 1.6666665459e-1f);
  p = fused_multiply_add(p, r, F{} + 5.0000001201e-1f);
  p = fused_multiply_add(p, r * r, r + 1.0f);
  const I exponent = (__builtin_convertvector(n, I) + 127) << 23;
  return reinterpret_cast<F>(reinterpret_cast<I>(p * reinterpret_cast<F>(exponent)) & ~underflow);
}

}  // namespace shardlm::backends::cpu
