#pragma once
// Portable 8-lane float vectors (GCC vector extensions): one AVX register where the
// target has AVX, else a pair of SSE ones. Unaligned loads/stores go through memcpy.

#include <cstdint>
#include <cstring>

namespace shardlm::backends::cpu {

#if defined(__AVX__)
using f32x8 = float __attribute__((vector_size(32)));
inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, f32x8 v) { std::memcpy(p, &v, sizeof v); }
inline float sum8(f32x8 v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }
#else
// Without AVX, GCC lowers a 32-byte vector type through the stack: a store and a
// reload around every operation. Two 16-byte halves stay in SSE registers.
using f32x4 = float __attribute__((vector_size(16)));
struct f32x8 {
  f32x4 low, high;
};
inline f32x8 operator+(f32x8 a, f32x8 b) { return {a.low + b.low, a.high + b.high}; }
inline f32x8 operator-(f32x8 a, f32x8 b) { return {a.low - b.low, a.high - b.high}; }
inline f32x8 operator*(f32x8 a, f32x8 b) { return {a.low * b.low, a.high * b.high}; }
inline f32x8 operator+(f32x8 a, float b) { return {a.low + b, a.high + b}; }
inline f32x8 operator*(f32x8 a, float b) { return {a.low * b, a.high * b}; }
inline f32x8 operator*(float a, f32x8 b) { return b * a; }
inline f32x8& operator+=(f32x8& a, f32x8 b) { return a = a + b; }
inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v.low, p, sizeof v.low);
  std::memcpy(&v.high, p + 4, sizeof v.high);
  return v;
}
inline void store8(float* p, f32x8 v) {
  std::memcpy(p, &v.low, sizeof v.low);
  std::memcpy(p + 4, &v.high, sizeof v.high);
}
inline float sum8(f32x8 v) {
  return ((v.low[0] + v.low[1]) + (v.low[2] + v.low[3])) + ((v.high[0] + v.high[1]) + (v.high[2] + v.high[3]));
}
#endif

inline float dot(const float* a, const float* b, int64_t n) {
  f32x8 acc0{}, acc1{};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 += load8(a + i) * load8(b + i);
    acc1 += load8(a + i + 8) * load8(b + i + 8);
  }
  for (; i + 8 <= n; i += 8) acc0 += load8(a + i) * load8(b + i);
  float sum = sum8(acc0 + acc1);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += alpha * x
inline void axpy(float alpha, const float* x, float* y, int64_t n) {
  const f32x8 a = f32x8{} + alpha;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(y + i, load8(y + i) + a * load8(x + i));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace shardlm::backends::cpu
