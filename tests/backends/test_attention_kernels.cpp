// Every table's attention kernels (kernel_table.h: flash_block for prefill, decode_attention
// for decode) against the scalar reference attention, on each table this CPU runs, both
// cache dtypes and head_dims that take each kernel (16-multiples the AVX2 ones,
// 32-multiples the AVX512-BF16 flash kernel over a bf16 cache). Prefill blocks cover
// 7 rows (a partial 12-row tile) and 48 (four full ones), keys over three 128-key tiles
// with an odd last tile, a sliding window and a padding row. Tolerance: 2e-5 of the
// largest output (f32 sums in another order); 1e-2 where the table's flash kernel rounds
// the queries and softmax weights to bf16 (2^-9 relative each).
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "backends/cpu/kernel_table.h"
#include "test_util.h"

namespace shardlm::backends::cpu {
namespace {

using testing::random_tensor;
using testing::relative_error;
using testing::to_doubles;

constexpr double sum_order_tolerance = 2e-5, rounded_tolerance = 1e-2;
constexpr int64_t cache_positions = 320;

struct FlashCase {
  int64_t seq, group, first_position, sliding_window;
  bool padding;  // the block's last position is padding (-1)
};

// The reference over one KV head: q [1, seq, group, head_dim], a cache [1, 1, cache_positions,
// head_dim] of each dtype.
Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& positions,
                           float scale, int64_t sliding_window) {
  Tensor out = Tensor::zeros(q.shape(), DType::f32);
  reference::attention(q, k, v, Tensor::from_i32(positions, {1, q.shape()[1]}), testing::identity_rows(1), scale,
                       sliding_window, out);
  return out;
}

std::string describe_kernel(const CpuKernels& table, DType cache_dtype, int64_t head_dim) {
  return std::string(table.isa) + " " + std::string(dtype_name(cache_dtype)) + " head_dim " + std::to_string(head_dim);
}

TEST(AttentionKernels, EveryTableFlashBlockMatchesTheReference) {
  std::mt19937 random(5);
  int checked = 0;
  for (const CpuKernels* table : available_cpu_kernels())
    for (DType cache_dtype : {DType::f32, DType::bf16})
      for (int64_t head_dim : {32, 48, 128, 256}) {
        const FlashBlockKernel flash = table->flash_block ? table->flash_block(head_dim) : nullptr;
        if (!flash) continue;
        const double bound = attention_rounds_to_bf16(*table, cache_dtype, head_dim) ? rounded_tolerance : sum_order_tolerance;
        for (const FlashCase& block : {FlashCase{7, 1, 250, 0, false}, FlashCase{24, 2, 271, 0, true}, FlashCase{24, 2, 0, 0, false},
                                   FlashCase{7, 1, 290, 100, false}}) {
          const int64_t rows = block.seq * block.group;
          Tensor q = random_tensor({1, block.seq, block.group, head_dim}, DType::f32, random);
          Tensor k = random_tensor({1, 1, cache_positions, head_dim}, cache_dtype, random);
          Tensor v = random_tensor({1, 1, cache_positions, head_dim}, cache_dtype, random);
          std::vector<int32_t> positions;
          for (int64_t s = 0; s < block.seq; ++s) positions.push_back(static_cast<int32_t>(block.first_position + s));
          if (block.padding) positions.back() = -1;
          const float scale = 0.125f;
          Tensor expected = reference_attention(q, k, v, positions, scale, block.sliding_window);
          Tensor actual = Tensor::zeros(q.shape(), DType::f32);
          std::vector<const float*> queries;
          std::vector<float*> outputs;
          std::vector<int32_t> row_positions;
          for (int64_t r = 0; r < rows; ++r) {
            queries.push_back(q.data<float>() + r * head_dim);
            outputs.push_back(actual.mutable_data<float>() + r * head_dim);
            row_positions.push_back(positions[static_cast<size_t>(r / block.group)]);
          }
          flash(queries.data(), row_positions.data(), rows, k.raw(), v.raw(), cache_dtype, head_dim, scale,
                block.sliding_window, outputs.data());
          EXPECT_LT(relative_error(to_doubles(actual), to_doubles(expected)), bound)
              << describe_kernel(*table, cache_dtype, head_dim) << " rows " << rows << " from " << block.first_position
              << " window " << block.sliding_window;
          ++checked;
        }
      }
  if (checked == 0) GTEST_SKIP() << "no table of this CPU has a flash kernel";
}

// Decode kernels leave the softmax unnormalized (attention_kernels.h): result / sum is the
// attention over keys [first, visible), here all 300 or 301 or the last 100. The AVX512-BF16
// table's, over a bf16 cache, rounds the queries and the softmax weights to bf16
// (attention_rounds_to_bf16). One to eight
// heads: the kernels take them two, or one, at a time over four or eight keys, and the
// keys past those one by one. head_dim 32 - 256: the values pass takes 1, 2, 4 or 8 steps
// of 32 columns at once on bf16 pairs, whole 128-column rows on 16 lanes.
TEST(AttentionKernels, EveryTableDecodeKernelMatchesTheReference) {
  std::mt19937 random(6);
  int checked = 0;
  for (const CpuKernels* table : available_cpu_kernels())
    for (DType cache_dtype : {DType::f32, DType::bf16})
      for (int64_t head_dim : {32, 48, 64, 128, 256}) {
        const DecodeAttentionKernel decode = table->decode_attention ? table->decode_attention(head_dim) : nullptr;
        if (!decode) continue;
        // Not a structured binding: clang 14's lambdas cannot capture one (`attend` below).
        for (const auto& shape :
             {std::array<int64_t, 3>{3, 300, 0}, {3, 300, 100}, {1, 301, 0}, {2, 301, 0}, {8, 299, 100}, {5, 66, 0}}) {
          const int64_t heads = shape[0], visible = shape[1], sliding_window = shape[2];
          const int64_t first = sliding_window ? visible - sliding_window : 0;
          Tensor q = random_tensor({1, 1, heads, head_dim}, DType::f32, random);
          Tensor k = random_tensor({1, 1, cache_positions, head_dim}, cache_dtype, random);
          Tensor v = random_tensor({1, 1, cache_positions, head_dim}, cache_dtype, random);
          const float scale = 0.125f;
          Tensor expected = reference_attention(q, k, v, {static_cast<int32_t>(visible - 1)}, scale, sliding_window);
          const std::string what = describe_kernel(*table, cache_dtype, head_dim) + " heads " +
                                   std::to_string(heads) + " of " + std::to_string(visible) + " keys, window " +
                                   std::to_string(sliding_window);
          const auto attend = [&](const Tensor& query) {
            Tensor actual = Tensor::zeros(query.shape(), DType::f32);
            float maximum[decode_max_heads], sum[decode_max_heads];
            float* result = actual.mutable_data<float>();
            decode(query.data<float>(), heads, k.raw(), v.raw(), cache_dtype, first, visible, head_dim, scale, result,
                   maximum, sum);
            for (int64_t h = 0; h < heads; ++h)
              for (int64_t d = 0; d < head_dim; ++d) result[h * head_dim + d] /= sum[h];
            return actual;
          };
          if (attention_rounds_to_bf16(*table, cache_dtype, head_dim)) {
            // Within the rounding's bound; and a zero query, whose weights (all 1) bf16 holds
            // exactly, to the order of the sums: the mean of the visible values, column by column.
            EXPECT_LT(relative_error(to_doubles(attend(q)), to_doubles(expected)), rounded_tolerance) << what;
            Tensor zero = Tensor::zeros(q.shape(), DType::f32);
            expected = reference_attention(zero, k, v, {static_cast<int32_t>(visible - 1)}, scale, sliding_window);
            EXPECT_LT(relative_error(to_doubles(attend(zero)), to_doubles(expected)), sum_order_tolerance) << what;
          } else {
            EXPECT_LT(relative_error(to_doubles(attend(q)), to_doubles(expected)), sum_order_tolerance) << what;
          }
          ++checked;
        }
      }
  if (checked == 0) GTEST_SKIP() << "no table of this CPU has a decode attention kernel";
}

}  // namespace
}  // namespace shardlm::backends::cpu
