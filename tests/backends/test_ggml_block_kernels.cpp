// The kernels that read a GGUF file's k-quant blocks as stored (q4_k, q6_k): every table's
// decoder against Python gguf's decoding of real blocks (tests/data/gguf/blocks.gguf) and
// core's scalar decoders, and every table's products over random blocks against the
// scalar reference linear. Tolerance: 1e-6 of the largest value for decoding (a fused
// multiply-add where the reference rounds twice); 2e-5 of the largest output for the
// products (f32 sums in another order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/kernel_table.h"
#include "backends/cpu/reference_kernels.h"
#include "core/dtype.h"
#include "core/ggml_blocks.h"
#include "io/gguf.h"
#include "test_util.h"

namespace shardlm::backends::cpu {
namespace {

using testing::random_tensor;
using testing::relative_error;
using testing::to_doubles;

double largest_difference(const float* got, const float* want, int64_t count, double& largest) {
  double worst = 0;
  for (int64_t i = 0; i < count; ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    largest = std::max(largest, std::fabs(static_cast<double>(want[i])));
  }
  return worst;
}

TEST(GgmlBlockKernels, EveryTableDecodesRealBlocksAsGgufPyDoes) {
  const io::GgufFile file = io::GgufFile::open(testing::data_path("gguf/blocks.gguf"));
  for (const char* name : {"q4_k", "q6_k"}) {
    const Tensor weight = file.weight(name);  // [3, 512], a view of the file's blocks
    EXPECT_EQ(weight.dtype(), std::string(name) == "q4_k" ? DType::q4_k : DType::q6_k);
    EXPECT_EQ(weight.raw(), static_cast<const void*>(file.tensor_bytes(name).data()));
    const Tensor expected = file.dequantized(std::string(name) + ".expected");
    const int64_t in = weight.shape()[1];
    for (const CpuKernels* table : available_cpu_kernels()) {
      ASSERT_NE(table->decode_blocks, nullptr) << table->isa;
      std::vector<float> row(static_cast<size_t>(in));
      for (int64_t r = 0; r < weight.shape()[0]; ++r) {
        const auto* blocks = static_cast<const std::byte*>(weight.raw()) + dtype_bytes(weight.dtype(), r * in);
        table->decode_blocks(weight.dtype(), blocks, in, row.data());
        double largest = 0;
        const double worst = largest_difference(row.data(), expected.data<float>() + r * in, in, largest);
        EXPECT_GT(largest, 0.0);
        EXPECT_LE(worst, 1e-6 * largest) << table->isa << " " << name << " row " << r;
      }
    }
  }
}

// Random super-blocks whose codes and sub-block scales take every value, with d (and
// Q4_K's dmin) small positive float16 values as real files have.
Tensor random_blocks(DType dtype, int64_t out_features, int64_t in, std::mt19937& random) {
  Tensor weight = Tensor::empty({out_features, in}, dtype);
  auto* bytes = static_cast<uint8_t*>(weight.mutable_raw());
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < weight.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(byte(random));
  std::uniform_real_distribution<float> step(1e-4f, 1e-2f);
  const size_t block_bytes = dtype_bytes(dtype, 256);
  for (size_t b = 0; b < weight.nbytes() / block_bytes; ++b) {
    uint8_t* block = bytes + b * block_bytes;
    const auto put = [&](size_t offset) {
      const uint16_t bits = f32_to_f16(step(random));
      std::memcpy(block + offset, &bits, sizeof bits);
    };
    if (dtype == DType::q4_k) {
      put(0);
      put(2);
    } else {
      put(208);
    }
  }
  return weight;
}

TEST(GgmlBlockKernels, EveryTablesProductsMatchTheReference) {
  std::mt19937 random(17);
  for (DType dtype : {DType::q4_k, DType::q6_k})
    for (int64_t in : {256, 768})
      for (int64_t rows : {1, 3, 4, 5, 13, 64})
        for (int64_t out_features : {37, 150}) {
          const Tensor x = random_tensor({rows, in}, DType::f32, random);
          const Tensor weight = random_blocks(dtype, out_features, in, random);
          Tensor expected = Tensor::zeros({rows, out_features}, DType::f32);
          reference::linear(x, weight, Tensor(), expected);
          const std::vector<double> want = to_doubles(expected);
          // Columns [3, out - 2) only: the rest must stay as they were.
          const int64_t begin = 3, end = out_features - 2;
          for (const CpuKernels* table : available_cpu_kernels()) {
            Tensor actual = Tensor::zeros({rows, out_features}, DType::f32);
            std::fill_n(actual.mutable_data<float>(), actual.numel(), -12345.0f);
            std::vector<float> packed;
            const float* input = rows <= gemv_max_rows
                                     ? gemv_input(*table, DType::f32, x.data<float>(), rows, in, packed)
                                     : gemm_input(*table, DType::f32, x.data<float>(), rows, in, packed);
            ggml_block_products(*table, input, rows, WeightView::of(weight), begin, end, actual.mutable_data<float>(),
                                out_features);
            const std::vector<double> got = to_doubles(actual);
            std::vector<double> got_range, want_range;
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t o = 0; o < out_features; ++o) {
                const size_t i = static_cast<size_t>(r * out_features + o);
                if (o < begin || o >= end) {
                  ASSERT_EQ(got[i], -12345.0) << table->isa << ": column " << o << " outside the range was written";
                  continue;
                }
                got_range.push_back(got[i]);
                want_range.push_back(want[i]);
              }
            EXPECT_LT(relative_error(got_range, want_range), 2e-5)
                << table->isa << " " << dtype_name(dtype) << " rows " << rows << " in " << in << " out "
                << out_features;
          }
        }
}

}  // namespace
}  // namespace shardlm::backends::cpu
