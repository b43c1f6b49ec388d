#pragma once
// The 8x8 transpose of 32-bit elements on 256-bit vectors, for the AVX2 table's packing and
// the AVX-512 table's too: on Zen 4 a 512-bit shuffle issues at half the rate of a 256-bit
// one, and packing through 16x16 transposes left the AVX-512 f32 and f16 gemms 2 - 3%
// slower (kernel_bench, alternating builds). Internal linkage: the files that include this
// are compiled for different instruction sets, and must not share one copy.
#include <immintrin.h>

namespace shardlm::backends::cpu {
namespace {

// Transposes the 8x8 block held in rows[0..8).
inline void transpose8(__m256 rows[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(rows[0], rows[1]), t1 = _mm256_unpackhi_ps(rows[0], rows[1]);
  const __m256 t2 = _mm256_unpacklo_ps(rows[2], rows[3]), t3 = _mm256_unpackhi_ps(rows[2], rows[3]);
  const __m256 t4 = _mm256_unpacklo_ps(rows[4], rows[5]), t5 = _mm256_unpackhi_ps(rows[4], rows[5]);
  const __m256 t6 = _mm256_unpacklo_ps(rows[6], rows[7]), t7 = _mm256_unpackhi_ps(rows[6], rows[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  rows[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  rows[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  rows[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  rows[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  rows[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  rows[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  rows[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  rows[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

}  // namespace
}  // namespace shardlm::backends::cpu
