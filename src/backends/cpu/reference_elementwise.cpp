// Reference kernels that touch each element once: embedding, silu_mul, add,
// gather_rows, and the row reductions used for sampling.
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/reference_kernels.h"
#include "core/ggml_blocks.h"
#include "core/quantize.h"

namespace shardlm::backends::reference {

void decode_row(const Tensor& weight, int64_t row, float* out) {
  const int64_t in = weight.shape()[1];
  dequantize_ggml(weight.dtype() == DType::q4_k ? GgmlType::q4_k : GgmlType::q6_k,
                  static_cast<const std::byte*>(weight.raw()) + dtype_bytes(weight.dtype(), row * in), out, in);
}

float load_f32(const Tensor& tensor, int64_t index) {
  switch (tensor.dtype()) {
    case DType::f32: return tensor.data<float>()[index];
    case DType::bf16: return bf16_to_f32(tensor.data<uint16_t>()[index]);
    case DType::f16: return f16_to_f32(tensor.data<uint16_t>()[index]);
    case DType::i8:
      if (tensor.quantized())  // scales [out, in / block] flatten to one per `quant_block` elements
        return static_cast<float>(tensor.data<int8_t>()[index]) *
               f16_to_f32(tensor.block_scales().data<uint16_t>()[index / Tensor::quant_block]);
      [[fallthrough]];
    case DType::i4:
      if (tensor.dtype() == DType::i4 && tensor.quantized() && tensor.shape().rank() == 2) {
        const int64_t in = tensor.shape()[1], row = index / in, k = index % in;
        return static_cast<float>(int4_value(static_cast<const uint8_t*>(tensor.raw()) + row * in / 2, k)) *
               f16_to_f32(tensor.block_scales().data<uint16_t>()[index / Tensor::quant_block]);
      }
      [[fallthrough]];
    default: fail("expected a floating-point or int8/int4-quantized tensor, got ", tensor.describe());
  }
}

void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, const Tensor& out) {
  const int64_t rows = table.shape()[0], hidden = table.shape()[1];
  const int32_t* id = ids.data<int32_t>();
  float* result = out.mutable_data<float>();
  for (int64_t t = 0; t < ids.numel(); ++t) {
    const int64_t row = id[t] - first_row;
    if (row >= 0 && row < rows && is_ggml_blocks(table.dtype())) {
      decode_row(table, row, result + t * hidden);
      continue;
    }
    for (int64_t j = 0; j < hidden; ++j)
      result[t * hidden + j] = row >= 0 && row < rows ? load_f32(table, row * hidden + j) : 0.0f;
  }
}

void copy_columns(const Tensor& source, int64_t source_column, const Tensor& destination, int64_t destination_column,
                  int64_t width) {
  const int64_t rows = source.shape()[0], source_width = source.shape()[1], destination_width = destination.shape()[1];
  SHARDLM_CHECK(destination.shape()[0] == rows && source_column + width <= source_width &&
                    destination_column + width <= destination_width,
                "copy_columns: ", width, " columns do not fit ", source.describe(), " -> ", destination.describe());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(destination.mutable_data<float>() + r * destination_width + destination_column,
                source.data<float>() + r * source_width + source_column, static_cast<size_t>(width) * sizeof(float));
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* result = out.mutable_data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) result[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

float gelu_tanh(float x) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);  // sqrt(2 / pi) (x + 0.044715 x^3)
  return 0.5f * x * (1.0f + std::tanh(inner));
}

void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* result = out.mutable_data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) result[i] = gelu_tanh(g[i]) * u[i];
}

void scale(const Tensor& x, float factor, const Tensor& out) {
  const float* in = x.data<float>();
  float* result = out.mutable_data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) result[i] = in[i] * factor;
}

void softcap(const Tensor& x, float cap, const Tensor& out) {
  const float* in = x.data<float>();
  float* result = out.mutable_data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) result[i] = cap * std::tanh(in[i] / cap);
}

void add(const Tensor& a, const Tensor& b, const Tensor& out) {
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* result = out.mutable_data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) result[i] = x[i] + y[i];
}

void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) {
  const int64_t rows = x.shape()[0], width = x.numel() / std::max<int64_t>(rows, 1);
  const int32_t* index = indices.data<int32_t>();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    SHARDLM_CHECK(index[i] >= 0 && index[i] < rows, "gather_rows: row ", index[i], " out of range");
    std::memcpy(out.mutable_data<float>() + i * width, x.data<float>() + index[i] * width, width * sizeof(float));
  }
}

int64_t argmax(std::span<const float> row) {
  int64_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[best]) best = static_cast<int64_t>(i);
  return best;
}

void softmax(std::span<const float> row, std::span<float> out) {
  float maximum = -std::numeric_limits<float>::infinity();
  for (float v : row) maximum = std::max(maximum, v);
  double sum = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    out[i] = row[i] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(row[i] - maximum);
    sum += out[i];
  }
  for (float& v : out) v = static_cast<float>(v / sum);
}

void log_softmax(std::span<const float> row, std::span<float> out) {
  float maximum = -std::numeric_limits<float>::infinity();
  for (float v : row) maximum = std::max(maximum, v);
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - maximum);
  const float log_sum = static_cast<float>(std::log(sum));
  for (size_t i = 0; i < row.size(); ++i) out[i] = row[i] - maximum - log_sum;
}

}  // namespace shardlm::backends::reference
