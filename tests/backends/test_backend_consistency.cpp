// Every op of every backend this build can run, against the scalar reference
// kernels, on the same random inputs. Optimized kernels may reorder sums, so the
// backend_tolerance is 1e-5 of the largest output (f32 inputs; bf16/f16 weights are exact in f32).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backends/backend.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/reference_kernels.h"
#include "test_util.h"

namespace shardlm::backends {
namespace {

using testing::identity_rows;
using testing::random_tensor;
using testing::relative_error;
using testing::to_doubles;

constexpr double backend_tolerance = 1e-5;

// An accelerator multiplies many rows on its matrix units with the activations rounded to
// the weights' 16-bit type (the CUDA backend: cuBLASLt bf16 x bf16 -> f32, as a bf16 model
// runs in transformers), 2^-8 relative per element for bf16; up to 8 rows it keeps f32
// activations in its own kernel.
// The CPU's AMX table rounds them to bf16 likewise for its gemm (bf16 weights whose row
// length is a multiple of 32).
double matmul_tolerance(const std::string& backend, DType weight_dtype, int64_t rows, int64_t in) {
  if (backend == "cpu")
    return rows > cpu::gemv_max_rows && cpu::gemm_rounds_input_to_bf16(cpu::cpu_kernels(), weight_dtype, in)
               ? 1e-2
               : backend_tolerance;
  return weight_dtype != DType::f32 && rows > 8 ? 1e-2 : backend_tolerance;
}

// The CPU's AVX512-BF16 attention kernels round the queries (and the flash kernel the softmax
// weights) to bf16 over a bf16 cache (as a bf16 model's attention in transformers), 2^-9
// relative each.
double attention_tolerance(const std::string& backend, DType cache_dtype, int64_t head_dim) {
  return backend == "cpu" && cpu::attention_rounds_to_bf16(cpu::cpu_kernels(), cache_dtype, head_dim)
             ? 1e-2
             : backend_tolerance;
}

std::vector<std::string> runnable_backends() {
  std::vector<std::string> names;
  for (const BackendInfo& info : list_backends())
    if (info.available) names.push_back(info.name);
  return names;
}

class BackendConsistency : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { backend_ = create_backend(GetParam()); }

  Tensor upload(const Tensor& host) { return backend_->to_device(host); }
  std::vector<double> download(const Tensor& device) {
    Tensor host = Tensor::zeros(device.shape(), device.dtype());
    backend_->copy_to_host(device, host);
    return to_doubles(host);
  }
  Tensor output(Shape shape) { return backend_->allocate(std::move(shape), DType::f32); }
  static std::vector<int32_t> ids_of(const Tensor& host) {
    return {host.data<int32_t>(), host.data<int32_t>() + host.numel()};
  }
  std::vector<int32_t> download_ids(const Tensor& device) {
    Tensor host = Tensor::zeros(device.shape(), DType::i32);
    backend_->copy_to_host(device, host);
    return ids_of(host);
  }

  void expect_top_k_matches_reference(const Tensor& logits, int64_t k) {
    const int64_t rows = logits.shape()[0];
    Tensor values = Tensor::zeros({rows, k}, DType::f32), indices = Tensor::zeros({rows, k}, DType::i32);
    reference::top_k(logits, values, indices);
    Tensor actual_values = output({rows, k}), actual_indices = backend_->allocate({rows, k}, DType::i32);
    backend_->top_k(upload(logits), actual_values, actual_indices);
    EXPECT_EQ(download_ids(actual_indices), ids_of(indices)) << "k " << k;
    std::vector<double> got = download(actual_values), want = to_doubles(values);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) << "k " << k << " at " << i;
  }

  std::unique_ptr<Backend> backend_;
  std::mt19937 random_{99};
};

// Widths 67 (no 8-wide loads fit), 264 (8-wide loads, then a tail) and 256 (whole
// 32-element tiles); 1 row takes the vector kernels, 7 and 20 the few-rows forms of a
// decode step of several sequences (the AVX512-BF16 table's), 40 the matrix units.
TEST_P(BackendConsistency, Linear) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (int64_t in : {int64_t{67}, int64_t{264}, int64_t{256}})
      for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{20}, int64_t{40}}) {
        Tensor x = random_tensor({rows, in}, DType::f32, random_), w = random_tensor({45, in}, dtype, random_);
        Tensor bias = random_tensor({45}, DType::f32, random_);
        Tensor expected = Tensor::zeros({rows, 45}, DType::f32), actual = output({rows, 45});
        reference::linear(x, w, bias, expected);
        backend_->linear(upload(x), upload(w), upload(bias), actual);
        EXPECT_LT(relative_error(download(actual), to_doubles(expected)), matmul_tolerance(GetParam(), dtype, rows, in))
            << dtype_name(dtype) << " rows " << rows << " in " << in;
      }
}

// Each fused op against the composition of the reference ops it replaces.
TEST_P(BackendConsistency, FusedLinearForms) {
  // in 91 = 5*16 + 8 + 3: every loop of the vector dot; 96: whole 32-element tiles.
  for (DType dtype : {DType::f32, DType::bf16})
  for (int64_t in : {int64_t{91}, int64_t{96}})
  for (int64_t rows : {int64_t{5}, int64_t{40}}) {
    const int64_t out_features = 29;
    const double tolerance = matmul_tolerance(GetParam(), dtype, rows, in);
    Tensor x = random_tensor({rows, in}, DType::f32, random_);
    Tensor w = random_tensor({out_features, in}, dtype, random_), w2 = random_tensor({out_features, in}, dtype, random_);
    Tensor bias = random_tensor({out_features}, DType::f32, random_), bias2 = random_tensor({out_features}, DType::f32, random_);
    Tensor residual = random_tensor({rows, out_features}, DType::f32, random_);
    Tensor norm_weight = random_tensor({in}, dtype, random_);
    Tensor first = Tensor::zeros({rows, out_features}, DType::f32), second = first.clone(), expected = first.clone();
    Tensor normed = Tensor::zeros({rows, in}, DType::f32);
    Tensor actual = output({rows, out_features});

    reference::linear(x, w, bias, first);
    reference::add(residual, first, expected);
    backend_->linear_residual(upload(x), upload(w), upload(bias), upload(residual), actual);
    EXPECT_LT(relative_error(download(actual), to_doubles(expected)), tolerance) << "linear_residual";

    reference::linear(x, w2, bias2, second);
    reference::silu_mul(first, second, expected);
    backend_->gated_linear(upload(x), upload(w), upload(bias), upload(w2), upload(bias2), actual);
    EXPECT_LT(relative_error(download(actual), to_doubles(expected)), tolerance) << "gated_linear";

    reference::rms_norm(x, norm_weight, 1e-5f, normed);
    reference::linear(normed, w, Tensor(), expected);
    backend_->rms_norm_linear(upload(x), upload(norm_weight), 1e-5f, upload(w), Tensor(), actual);
    EXPECT_LT(relative_error(download(actual), to_doubles(expected)), tolerance) << "rms_norm_linear";
  }
}

// Three linears of one input (q, k and v): widths 45, 16 and 29, so that gemv ranges and
// gemm column blocks cross from one weight into the next; a bias on two of them.
TEST_P(BackendConsistency, SiblingLinears) {
  for (DType dtype : {DType::f32, DType::bf16})
  for (int64_t in : {int64_t{91}, int64_t{96}})
  for (int64_t rows : {int64_t{1}, int64_t{4}, int64_t{40}}) {
    Tensor x = random_tensor({rows, in}, DType::f32, random_);
    std::vector<Tensor> weights, biases, expected, actual;
    for (int64_t out_features : {int64_t{45}, int64_t{16}, int64_t{29}}) {
      weights.push_back(random_tensor({out_features, in}, dtype, random_));
      biases.push_back(out_features == 16 ? Tensor() : random_tensor({out_features}, DType::f32, random_));
      expected.push_back(Tensor::zeros({rows, out_features}, DType::f32));
      reference::linear(x, weights.back(), biases.back(), expected.back());
      actual.push_back(output({rows, out_features}));
    }
    std::vector<Tensor> device_weights, device_biases;
    for (size_t i = 0; i < weights.size(); ++i) {
      device_weights.push_back(upload(weights[i]));
      device_biases.push_back(biases[i].defined() ? upload(biases[i]) : Tensor());
    }
    std::vector<SiblingLinear> linears;
    for (size_t i = 0; i < weights.size(); ++i) linears.push_back({&device_weights[i], &device_biases[i], &actual[i]});
    backend_->sibling_linears(upload(x), linears);
    for (size_t i = 0; i < weights.size(); ++i)
      EXPECT_LT(relative_error(download(actual[i]), to_doubles(expected[i])), matmul_tolerance(GetParam(), dtype, rows, in))
          << dtype_name(dtype) << " rows " << rows << " in " << in << " linear " << i;
  }
}

TEST_P(BackendConsistency, NormRopeElementwise) {
  Tensor x = random_tensor({5, 3, 16}, DType::f32, random_), w = random_tensor({16}, DType::bf16, random_);
  Tensor expected = Tensor::zeros({5, 3, 16}, DType::f32), actual = output({5, 3, 16});
  reference::rms_norm(x, w, 1e-6f, expected);
  backend_->rms_norm(upload(x), upload(w), 1e-6f, actual);
  EXPECT_LT(relative_error(download(actual), to_doubles(expected)), backend_tolerance);

  // Partial rotary_dim, both pairings (50 pairs: a tail past 8-wide vectors); 700 tokens
  // split over the pool (their cos/sin table too). Consecutive calls change the
  // frequencies, or the positions but not their count, or nothing (a backend may keep
  // its cos/sin table between calls).
  const int64_t head_dim = 128, rotary_dim = 100;
  for (bool interleaved : {false, true})
    for (int64_t tokens : {5, 700})
      for (auto [base, shift] : {std::pair{1e4, 0}, {1e4, 0}, {5e5, 0}, {5e5, 3}}) {
        RotaryEmbedding rotary{.rotary_dim = rotary_dim, .interleaved = interleaved};
        for (int64_t i = 0; i < rotary_dim / 2; ++i) rotary.inv_freq.push_back(std::pow(base, -2.0 * i / rotary_dim));
        std::vector<int32_t> position_values;
        for (int64_t t = 0; t < tokens; ++t) position_values.push_back(static_cast<int32_t>((t * 37 + shift) % 4000));
        Tensor positions = Tensor::from_i32(position_values, {tokens});
        Tensor rotated = random_tensor({tokens, 3, head_dim}, DType::f32, random_);
        Tensor device_rotated = upload(rotated.clone());
        reference::rope(rotated, positions, rotary);
        backend_->rope(device_rotated, upload(positions), rotary);
        EXPECT_LT(relative_error(download(device_rotated), to_doubles(rotated)), backend_tolerance)
            << "rope interleaved " << interleaved << " tokens " << tokens << " base " << base
            << " shift " << shift;
      }

  Tensor y = random_tensor({5, 3, 16}, DType::f32, random_);
  // silu_mul also over 33003 values (split over the pool, a tail past the 8-wide
  // loop), and in place on up or on gate.
  Tensor gate = random_tensor({3, 11001}, DType::f32, random_), up = random_tensor({3, 11001}, DType::f32, random_);
  for (const auto& [first, second] : {std::pair{x, y}, std::pair{gate, up}}) {
    Tensor product = Tensor::zeros(first.shape(), DType::f32), device_product = output(first.shape());
    reference::silu_mul(first, second, product);
    backend_->silu_mul(upload(first), upload(second), device_product);
    EXPECT_LT(relative_error(download(device_product), to_doubles(product)), backend_tolerance);
    Tensor device_second = upload(second.clone());  // the CPU's upload shares the host tensor's memory
    backend_->silu_mul(upload(first), device_second, device_second);
    EXPECT_LT(relative_error(download(device_second), to_doubles(product)), backend_tolerance) << "in place on up";
    Tensor device_first = upload(first.clone());
    backend_->silu_mul(device_first, upload(second), device_first);
    EXPECT_LT(relative_error(download(device_first), to_doubles(product)), backend_tolerance) << "in place on gate";
  }
  reference::add(x, y, expected);
  backend_->add(upload(x), upload(y), actual);
  EXPECT_LT(relative_error(download(actual), to_doubles(expected)), backend_tolerance);
}

// Gemma's elementwise ops over values up to ±8 (gelu's tails, tanh's saturation), 33003
// of them (split over the pool), out of place and in place.
TEST_P(BackendConsistency, GeluScaleSoftcap) {
  const Tensor gate = random_tensor({3, 11001}, DType::f32, random_, 8.0f);
  const Tensor up = random_tensor({3, 11001}, DType::f32, random_);
  Tensor expected = Tensor::zeros(gate.shape(), DType::f32), actual = output(gate.shape());
  reference::gelu_tanh_mul(gate, up, expected);
  backend_->gelu_tanh_mul(upload(gate), upload(up), actual);
  EXPECT_LT(relative_error(download(actual), to_doubles(expected)), backend_tolerance) << "gelu_tanh_mul";
  Tensor device_gate = upload(gate.clone());
  backend_->gelu_tanh_mul(device_gate, upload(up), device_gate);
  EXPECT_LT(relative_error(download(device_gate), to_doubles(expected)), backend_tolerance) << "in place on gate";

  reference::scale(gate, 25.298f, expected);
  backend_->scale(upload(gate), 25.298f, actual);
  EXPECT_LT(relative_error(download(actual), to_doubles(expected)), backend_tolerance) << "scale";

  reference::softcap(gate, 3.0f, expected);
  Tensor device_capped = upload(gate.clone());
  backend_->softcap(device_capped, 3.0f, device_capped);
  EXPECT_LT(relative_error(download(device_capped), to_doubles(expected)), backend_tolerance) << "softcap in place";
}

// copy_columns through the backend under test, or the reference when it is null.
struct ReferenceOrBackend {
  Backend* backend = nullptr;
  void operator()(const Tensor& source, int64_t source_column, const Tensor& out, int64_t out_column,
                  int64_t width) const {
    if (backend) return backend->copy_columns(source, source_column, out, out_column, width);
    reference::copy_columns(source, source_column, out, out_column, width);
  }
};

TEST_P(BackendConsistency, EmbeddingAndGather) {
  Tensor table = random_tensor({31, 12}, DType::f16, random_);
  Tensor ids = Tensor::from_i32(std::vector<int32_t>{30, 2, 2, 0}, {4});
  Tensor expected = Tensor::zeros({4, 12}, DType::f32), actual = output({4, 12});
  reference::embedding(table, ids, 0, expected);
  backend_->embedding(upload(table), upload(ids), 0, actual);
  EXPECT_EQ(download(actual), to_doubles(expected));
  // A vocabulary shard of rows 2..32: id 0 falls outside it.
  reference::embedding(table, ids, 2, expected);
  backend_->embedding(upload(table), upload(ids), 2, actual);
  EXPECT_EQ(download(actual), to_doubles(expected));

  Tensor columns_expected = Tensor::zeros({4, 5}, DType::f32), columns = output({4, 5});
  for (Tensor* out : {&columns_expected, &columns}) {
    const Tensor& source = out == &columns ? actual : expected;
    ReferenceOrBackend copy = out == &columns ? ReferenceOrBackend{backend_.get()} : ReferenceOrBackend{};
    copy(source, 0, *out, 0, 5);
    copy(source, 3, *out, 1, 4);
  }
  EXPECT_EQ(download(columns), to_doubles(columns_expected));

  Tensor rows = Tensor::from_i32(std::vector<int32_t>{3, 1}, {2});
  Tensor picked_expected = Tensor::zeros({2, 12}, DType::f32), picked = output({2, 12});
  reference::gather_rows(expected, rows, picked_expected);
  backend_->gather_rows(actual, upload(rows), picked);
  EXPECT_EQ(download(picked), to_doubles(picked_expected));
}

// Decode (seq 1) and prefill shapes; head_dim 20 takes the per-row path, 32 and 128 the
// flash path where the CPU has one; 140 positions span two of its 128-key tiles and
// several row blocks. Both cache dtypes: the reference reads the same rounded bf16 entries.
// Two step rows into a cache of three sequence slots, out of order and skipping one
// (continuous batching): step row 0 is slot 2, row 1 slot 0; slot 1 is left as it was.
TEST_P(BackendConsistency, CacheWriteAndAttention) {
  struct Shape_ {
    int64_t seq, head_dim;
  };
  for (DType cache_dtype : {DType::f32, DType::bf16})
  for (Shape_ shape : {Shape_{4, 20}, Shape_{1, 32}, Shape_{4, 32}, Shape_{140, 32}, Shape_{9, 128}}) {
    const int64_t batch = 2, slots = 3, seq = shape.seq, heads = 8, kv_heads = 2, head_dim = shape.head_dim;
    const int64_t max_cache_len = seq + 15;
    Tensor entries = random_tensor({batch, seq, kv_heads, head_dim}, DType::f32, random_);
    // Row 0 starts at 0; row 1 at 10 and ends in padding (position -1), as the last
    // prefill chunk does (with seq 1, row 1 is all padding).
    std::vector<int32_t> position_values;
    for (int64_t s = 0; s < seq; ++s) position_values.push_back(static_cast<int32_t>(s));
    for (int64_t s = 0; s < seq; ++s) position_values.push_back(s + 2 >= seq ? -1 : static_cast<int32_t>(10 + s));
    Tensor positions = Tensor::from_i32(position_values, {batch, seq});
    Tensor cache_rows = Tensor::from_i32(std::vector<int32_t>{2, 0}, {batch});
    Tensor k_expected = random_tensor({slots, kv_heads, max_cache_len, head_dim}, cache_dtype, random_);
    Tensor v_expected = random_tensor({slots, kv_heads, max_cache_len, head_dim}, cache_dtype, random_);
    Tensor k_actual = upload(k_expected.clone()), v_actual = upload(v_expected.clone());
    reference::kv_cache_write(k_expected, entries, positions, cache_rows);
    reference::kv_cache_write(v_expected, entries, positions, cache_rows);
    backend_->kv_cache_write(k_actual, upload(entries), upload(positions), upload(cache_rows));
    backend_->kv_cache_write(v_actual, upload(entries), upload(positions), upload(cache_rows));
    EXPECT_EQ(download(k_actual), to_doubles(k_expected));

    Tensor q = random_tensor({batch, seq, heads, head_dim}, DType::f32, random_);
    for (int64_t sliding_window : {int64_t{0}, int64_t{3}}) {
      Tensor expected = Tensor::zeros({batch, seq, heads, head_dim}, DType::f32), actual = output(q.shape());
      reference::attention(q, k_expected, v_expected, positions, cache_rows, 0.25f, sliding_window, expected);
      backend_->attention(upload(q), k_actual, v_actual, upload(positions), upload(cache_rows), 0.25f,
                          sliding_window, actual);
      EXPECT_LT(relative_error(download(actual), to_doubles(expected)),
                attention_tolerance(GetParam(), cache_dtype, head_dim))
          << dtype_name(cache_dtype) << " seq " << seq << " head_dim " << head_dim << " window " << sliding_window;
    }
  }
}

// Decode over a long cache: 100 visible positions (two key tiles), every group size
// the decode kernel splits differently (1 to 8 query heads per KV head, 9 in two
// passes), head_dim 48 (16-column value chunks) and 128 (32-column ones).
TEST_P(BackendConsistency, DecodeAttentionGroupSizes) {
  for (DType cache_dtype : {DType::f32, DType::bf16})
    for (int64_t head_dim : {48, 128})
      for (int64_t group : {1, 2, 3, 5, 8, 9}) {
        const int64_t kv_heads = 2, heads = kv_heads * group, max_cache_len = 110;
        Tensor k = random_tensor({1, kv_heads, max_cache_len, head_dim}, cache_dtype, random_);
        Tensor v = random_tensor({1, kv_heads, max_cache_len, head_dim}, cache_dtype, random_);
        Tensor q = random_tensor({1, 1, heads, head_dim}, DType::f32, random_);
        const int32_t last = 99;
        Tensor positions = Tensor::from_i32(std::span(&last, 1), {1, 1});
        Tensor expected = Tensor::zeros(q.shape(), DType::f32), actual = output(q.shape());
        const Tensor cache_rows = identity_rows(1);
        reference::attention(q, k, v, positions, cache_rows, 0.2f, 0, expected);
        backend_->attention(upload(q), upload(k), upload(v), upload(positions), upload(cache_rows), 0.2f, 0, actual);
        // Six heads or more take the CPU's flash kernel (a block of rows).
        EXPECT_LT(relative_error(download(actual), to_doubles(expected)),
                  attention_tolerance(GetParam(), cache_dtype, head_dim))
            << dtype_name(cache_dtype) << " head_dim " << head_dim << " group " << group;
      }
}

// Decode with one KV head over a long cache, which a CPU splits into parts of the
// cached positions and merges (too few (row, KV head) tasks for its threads otherwise):
// 1100 visible positions, or the last 600 of them through a sliding window (parts that
// start past position 0); group 9 in two passes of heads within each part. Then two
// rows (with two threads or more, also split): one padding, or two positions of one
// sequence seeing different lengths.
TEST_P(BackendConsistency, DecodeAttentionLongCache) {
  struct Rows {
    int64_t batch, seq;
    std::vector<int32_t> positions;
  };
  for (const Rows& rows : {Rows{1, 1, {1099}}, Rows{2, 1, {1099, -1}}, Rows{1, 2, {700, 1099}}})
    for (DType cache_dtype : {DType::f32, DType::bf16})
      for (int64_t group : {3, 9})
        for (int64_t sliding_window : {int64_t{0}, int64_t{600}}) {
          const int64_t heads = group, head_dim = 64, max_cache_len = 1200;
          Tensor k = random_tensor({rows.batch, 1, max_cache_len, head_dim}, cache_dtype, random_);
          Tensor v = random_tensor({rows.batch, 1, max_cache_len, head_dim}, cache_dtype, random_);
          Tensor q = random_tensor({rows.batch, rows.seq, heads, head_dim}, DType::f32, random_);
          Tensor positions = Tensor::from_i32(rows.positions, {rows.batch, rows.seq});
          Tensor expected = Tensor::zeros(q.shape(), DType::f32), actual = output(q.shape());
          const Tensor cache_rows = identity_rows(rows.batch);
          reference::attention(q, k, v, positions, cache_rows, 0.3f, sliding_window, expected);
          backend_->attention(upload(q), upload(k), upload(v), upload(positions), upload(cache_rows), 0.3f,
                              sliding_window, actual);
          EXPECT_LT(relative_error(download(actual), to_doubles(expected)),
                    attention_tolerance(GetParam(), cache_dtype, head_dim))
              << dtype_name(cache_dtype) << " batch " << rows.batch << " seq " << rows.seq << " group " << group
              << " window " << sliding_window;
        }
}

// Ties in value come out in index order and NaN ranks first, as torch.topk; exact.
TEST_P(BackendConsistency, TopK) {
  Tensor logits = random_tensor({3, 1000}, DType::f32, random_);
  float* data = logits.mutable_data<float>();
  for (int64_t i : {17, 400, 999}) data[i] = 9.0f;  // row 0: a three-way tie at the top
  data[1000 + 5] = std::numeric_limits<float>::quiet_NaN();  // row 1: a NaN
  for (int64_t i = 2000; i < 3000; ++i) data[i] = static_cast<float>((i * 7) % 5);  // row 2: ties everywhere
  for (int64_t k : {int64_t{1}, int64_t{5}, std::min<int64_t>(64, backend_->max_top_k())})
    expect_top_k_matches_reference(logits, k);
  Tensor expected_ids = Tensor::zeros({3, 1}, DType::i32), expected_values = Tensor::zeros({3, 1}, DType::f32);
  reference::top_k(logits, expected_values, expected_ids);
  // NaN first; else the lowest index among the best.
  EXPECT_EQ(ids_of(expected_ids), (std::vector<int32_t>{17, 5, 2}));  // columns of each row
}

// Rows whose best come late, after k candidates are already held (where a fast kernel
// stops ranking most logits one by one), over a width that is not a multiple of 8.
TEST_P(BackendConsistency, TopKLateCandidates) {
  constexpr int64_t vocab = 1003;
  Tensor logits = random_tensor({6, vocab}, DType::f32, random_);
  float* row[6];
  for (int64_t r = 0; r < 6; ++r) row[r] = logits.mutable_data<float>() + r * vocab;
  const float nan = std::numeric_limits<float>::quiet_NaN(), infinity = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) row[0][i] = static_cast<float>(i) * 0.01f;  // rising: every group displaces
  for (int64_t i : {500, 733, 1002}) row[1][i] = nan;                            // NaNs late, one in the tail
  for (int64_t i = 0; i < vocab; ++i) row[2][i] = -infinity;                     // all -inf but two ties late
  row[2][640] = row[2][641] = 1.0f;
  for (int64_t i = 0; i < vocab; ++i) row[3][i] = nan;  // all NaN
  for (int64_t i = 0; i < vocab; ++i) row[4][i] = static_cast<float>(i % 3);  // ties at the threshold in every group
  row[5][1001] = 100.0f;                                                      // the best in the tail
  for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{51}}) expect_top_k_matches_reference(logits, k);
  // k above the row length: every logit, then -inf / -1.
  Tensor short_rows = random_tensor({2, 7}, DType::f32, random_);
  if (backend_->max_top_k() >= 10) expect_top_k_matches_reference(short_rows, 10);
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, BackendConsistency, ::testing::ValuesIn(runnable_backends()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace shardlm::backends
