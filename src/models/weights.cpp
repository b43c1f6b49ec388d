#include "models/weights.h"

#include <cstring>

#include "core/ggml_blocks.h"
#include "core/quantize.h"
#include "io/model_files.h"

namespace shardlm::models {
namespace {

// Rows `rows` and columns `columns` (null: all) of a stored 1-D or 2-D tensor: a view for
// one range of rows, else a new tensor holding just those elements.
Tensor take_part(const Tensor& whole, const parallel::Segments* rows, const parallel::Segments* columns) {
  const Shape& shape = whole.shape();
  if (!columns && (!rows || rows->ranges.size() == 1)) {
    if (!rows) return whole;
    return whole.slice_rows(rows->ranges[0].first, rows->ranges[0].second);
  }
  SHARDLM_CHECK(shape.rank() == 2 || !columns, "a column part of ", whole.describe(), " (not a matrix)");
  const parallel::Segments all_rows{{{0, shape[0]}}};
  const parallel::Segments all_columns{{{0, shape.rank() == 2 ? shape[1] : 1}}};
  const parallel::Segments& row_part = rows ? *rows : all_rows;
  const parallel::Segments& column_part = columns ? *columns : all_columns;
  const int64_t width = shape.rank() == 2 ? shape[1] : 1;
  const DType dtype = whole.dtype();  // int4: columns come in whole blocks, so whole bytes
  Shape part_shape = shape.rank() == 2 ? Shape{row_part.size(), column_part.size()} : Shape{row_part.size()};
  Tensor part = Tensor::empty(part_shape, whole.dtype());
  const auto* source = static_cast<const uint8_t*>(whole.raw());
  auto* destination = static_cast<uint8_t*>(part.mutable_raw());
  for (const auto& [row_begin, row_end] : row_part.ranges)
    for (int64_t row = row_begin; row < row_end; ++row)
      for (const auto& [column_begin, column_end] : column_part.ranges) {
        const size_t bytes = dtype_bytes(dtype, column_end - column_begin);
        std::memcpy(destination, source + dtype_bytes(dtype, row * width + column_begin), bytes);
        destination += bytes;
      }
  return part;
}

std::string describe_segments(const parallel::Segments* segments) {
  if (!segments) return "all";
  std::string text;
  for (const auto& [begin, end] : segments->ranges) text += str_cat(text.empty() ? "" : ",", "[", begin, ",", end, ")");
  return text;
}

void check_within(const std::string& name, const Shape& shape, const parallel::Segments* rows,
                  const parallel::Segments* columns) {
  for (const auto& [segments, dim] : {std::pair{rows, 0}, std::pair{columns, 1}}) {
    if (!segments) continue;
    for (const auto& [begin, end] : segments->ranges)
      if (static_cast<size_t>(dim) >= shape.rank() || begin < 0 || end <= begin || end > shape[dim])
        fail("tensor '", name, "' ", shape.to_string(), ": this rank's part (rows ", describe_segments(rows),
             ", columns ", describe_segments(columns), ") does not fit it: the tp_plan cannot apply to this tensor");
  }
}

}  // namespace

Tensor WeightLoader::load_quantized(const std::string& name, Tensor values, const parallel::Segments* rows,
                                    const parallel::Segments* columns) const {
  const std::string scale_name = block_scale_name(name);
  if (!values.quantized() && !checkpoint_->contains(scale_name))
    fail("tensor '", name, "' is ", dtype_name(values.dtype()), " but '", scale_name,
         "' (its block scales) is missing: only int8 and int4 checkpoints written by `shardlm quantize` can be "
         "loaded");
  // A GGUF file's Q8_0, Q5_0 and Q4_0 weights come with their scales.
  Tensor scales = values.quantized() ? values.block_scales() : checkpoint_->tensor(scale_name);
  parallel::Segments scale_columns;
  if (columns) {
    for (const auto& [begin, end] : columns->ranges) {
      if (begin % Tensor::quant_block != 0 || end % Tensor::quant_block != 0)
        fail("tensor '", name, "' is ", dtype_name(values.dtype()), " with a scale per ", Tensor::quant_block,
             " columns; this rank's columns [",
             begin, ", ", end, ") cut a block: choose a tp_size that splits its columns at multiples of ",
             Tensor::quant_block, ", or replicate it in the tp_plan");
      scale_columns.ranges.emplace_back(begin / Tensor::quant_block, end / Tensor::quant_block);
    }
  }
  try {
    if (scales.shape().rank() == 2 && values.shape().rank() == 2 &&
        scales.shape()[0] == values.shape()[0] && scales.shape()[1] * Tensor::quant_block == values.shape()[1])
      scales = take_part(scales, rows, columns ? &scale_columns : nullptr);
    return take_part(values, rows, columns).with_block_scales(std::move(scales));
  } catch (const Error& error) {
    fail("tensor '", name, "': ", error.what());
  }
}

Tensor WeightLoader::require(const std::string& name, const Shape& expected) {
  if (tensor_parallel_.size() > 1 && style_for(name) != parallel::ShardStyle::replicate)
    fail("the tp_plan gives '", name, "' ", expected.to_string(), " the style '",
         parallel::shard_style_name(style_for(name)),
         "', but it is not split by any style here (norm weights and similar stay whole): use 'replicate' or "
         "drop the rule");
  return require_part(name, expected, nullptr, nullptr);
}

Tensor WeightLoader::require_plus(const std::string& name, const Shape& expected, float offset) {
  if (tensor_parallel_.size() > 1 && style_for(name) != parallel::ShardStyle::replicate)
    fail("the tp_plan splits '", name, "', a norm weight that stays whole: use 'replicate' or drop the rule");
  check_within(name, expected, nullptr, nullptr);
  if (!checkpoint_) {
    requested_.emplace_back(name, expected);
    return Tensor::empty(expected, DType::f32);
  }
  const Tensor stored = checkpoint_->tensor(name);
  read_.insert(name);
  if (stored.shape() != expected)
    fail("tensor '", name, "' has shape ", stored.shape().to_string(), " but ", config_source_, " implies ",
         expected.to_string(), ": config.json does not match the weights");
  if (!is_floating(stored.dtype()))
    fail("tensor '", name, "' is ", dtype_name(stored.dtype()), "; a norm weight must be a float");
  Tensor shifted = stored.dtype() == DType::f32 ? stored.clone() : stored.to_dtype(DType::f32);
  float* values = shifted.mutable_data<float>();
  for (int64_t i = 0; i < shifted.numel(); ++i) values[i] += offset;
  return place(std::move(shifted), name);
}

Tensor WeightLoader::require_part(const std::string& name, const Shape& expected, const parallel::Segments* rows,
                                  const parallel::Segments* columns) {
  check_within(name, expected, rows, columns);
  if (!checkpoint_) {
    requested_.emplace_back(name, expected);
    Shape part = expected;
    if (rows) part = expected.rank() == 2 ? Shape{rows->size(), expected[1]} : Shape{rows->size()};
    if (columns) part = Shape{part[0], columns->size()};
    return Tensor::empty(part, *options_.dtype);
  }
  Tensor stored = checkpoint_->tensor(name);
  read_.insert(name);
  // int4 is stored as uint8 [out, in / 2], two values a byte, beside its block scales.
  if (stored.dtype() == DType::u8 && stored.shape().rank() == 2 && checkpoint_->contains(block_scale_name(name)))
    stored = stored.view_bytes(0, Shape{stored.shape()[0], stored.shape()[1] * 2}, DType::i4);
  const bool block_quantized = stored.dtype() == DType::i8 || stored.dtype() == DType::i4;
  if (block_quantized && !stored.quantized()) read_.insert(block_scale_name(name));
  if (stored.shape() != expected)
    fail("tensor '", name, "' has shape ", stored.shape().to_string(), " but ", config_source_, " implies ",
         expected.to_string(), ": config.json does not match the weights");
  if (block_quantized) return finish_loading(load_quantized(name, stored, rows, columns), name);
  if (is_ggml_blocks(stored.dtype()) && columns)
    for (const auto& [begin, end] : columns->ranges)
      if (begin % 256 != 0 || end % 256 != 0)
        fail("tensor '", name, "' is ", dtype_name(stored.dtype()), ", blocks of 256 columns; this rank's columns [",
             begin, ", ", end, ") cut a block: choose a tp_size that splits its columns at multiples of 256, or "
             "replicate it in the tp_plan");
  if (!is_floating(stored.dtype()) && !is_ggml_blocks(stored.dtype()))
    fail("tensor '", name, "' is ", dtype_name(stored.dtype()),
         "; weights must be float32, bfloat16, float16, or int8 or int4 with block scales");
  Tensor tensor = finish_loading(take_part(stored, rows, columns), name);
  // The part now lives elsewhere: the file's pages need not stay resident for it.
  if (tensor.raw() < stored.raw() ||
      static_cast<const uint8_t*>(tensor.raw()) >= static_cast<const uint8_t*>(stored.raw()) + stored.nbytes())
    io::release_mapped_pages(stored.raw(), stored.nbytes());
  return tensor;
}

namespace {

// `source`'s bytes into `destination`, 16 MB at a time; a mapped source's file pages
// are released behind each part, so the process never holds both copies.
void copy_releasing_mapped_pages(const Tensor& source, const Tensor& destination) {
  constexpr size_t part = size_t{16} << 20;
  const auto* from = static_cast<const std::byte*>(source.raw());
  auto* to = static_cast<std::byte*>(destination.mutable_raw());
  for (size_t offset = 0; offset < source.nbytes(); offset += part) {
    const size_t bytes = std::min(part, source.nbytes() - offset);
    std::memcpy(to + offset, from + offset, bytes);
    if (!source.writable()) io::release_mapped_pages(from + offset, bytes);
  }
}

}  // namespace

Tensor WeightLoader::in_huge_pages(const Tensor& tensor) {
  const auto place = [&](const Tensor& part) {
    // A large tensor converted at load already has a mapping of its own.
    if (part.writable() && part.nbytes() > HostArena::largest_carved) return part;
    Tensor placed = arena_.empty(part.shape(), part.dtype());
    copy_releasing_mapped_pages(part, placed);
    return placed;
  };
  Tensor placed = place(tensor);
  return tensor.quantized() ? placed.with_block_scales(place(tensor.block_scales())) : placed;
}

int WeightLoader::spmd_split_dim(const std::string& name, const Tensor& tensor) const {
  if (!options_.device || options_.device->partitions() == 1) return -1;
  switch (options_.spmd_plan.style_for(name).value_or(parallel::ShardStyle::replicate)) {
    case parallel::ShardStyle::colwise:
    case parallel::ShardStyle::colwise_gather_output:
    case parallel::ShardStyle::packed_colwise:
    case parallel::ShardStyle::embedding_rowwise: return 0;
    case parallel::ShardStyle::rowwise:
    case parallel::ShardStyle::rowwise_split_input:
    case parallel::ShardStyle::packed_rowwise: return tensor.shape().rank() == 2 ? 1 : -1;
    case parallel::ShardStyle::replicate: return -1;
  }
  return -1;
}

Tensor WeightLoader::finish_loading(Tensor tensor, const std::string& name) {
  // Only the CPU backend reads a GGUF file's blocks: another device gets their values decoded.
  const bool on_host = !options_.device || options_.device->device().kind == DeviceKind::cpu;
  if (!on_host && checkpoint_->from_gguf() && !is_floating(tensor.dtype())) tensor = dequantize_weight(tensor);
  if (!tensor.quantized() && !is_ggml_blocks(tensor.dtype())) {
    if (options_.dtype && *options_.dtype != tensor.dtype()) tensor = tensor.to_dtype(*options_.dtype);
    const int threads = options_.threads;
    if (options_.quantize_int8 && quantizable(tensor.shape())) tensor = quantize_int8(tensor, threads);
    if (options_.quantize_int4 && quantizable(tensor.shape()))
      tensor = keeps_eight_bits_under_int4(name) ? quantize_int8(tensor, threads) : quantize_int4(tensor, threads);
  }
  return place(std::move(tensor), name);
}

Tensor WeightLoader::place(Tensor tensor, const std::string& name) {
  if ((tensor.dtype() == DType::i4 || options_.quantize_int4) && options_.device &&
      options_.device->device().kind != DeviceKind::cpu)
    fail("tensor '", name, "' is int4, and only the CPU backend has int4 kernels; ", options_.device->name(),
         " has none: run int4 weights with --device cpu, or the float weights there");
  const bool on_host = !options_.device || options_.device->device().kind == DeviceKind::cpu;
  if (on_host && (tensor.writable() || options_.copy_mapped_weights)) tensor = in_huge_pages(tensor);
  if (!matrix_dtype_ && tensor.shape().rank() == 2) matrix_dtype_ = tensor.dtype();
  loaded_bytes_ += tensor.nbytes() + (tensor.quantized() ? tensor.block_scales().nbytes() : 0);
  if (!options_.device) return tensor;
  const int split_dim = spmd_split_dim(name, tensor);
  return split_dim >= 0 ? options_.device->to_device_split(tensor, split_dim) : options_.device->to_device(tensor);
}

parallel::ShardStyle WeightLoader::style_for(const std::string& name) const {
  if (tensor_parallel_.size() <= 1) return parallel::ShardStyle::replicate;
  return tensor_parallel_.plan.style_for(name).value_or(parallel::ShardStyle::replicate);
}

}  // namespace shardlm::models
