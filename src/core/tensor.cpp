#include "core/tensor.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace shardlm {

std::string Device::to_string() const {
  switch (kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::cuda: return str_cat("cuda:", index);
    case DeviceKind::pjrt: return str_cat("pjrt:", index);
  }
  return "?";
}

namespace {

constexpr size_t huge_page = Tensor::huge_page_bytes;

// A large tensor (converted weights, KV caches) gets its own mapping, 2 MB-aligned and
// marked for transparent huge pages: decode streams every weight once per token, and
// with 4 KB pages each 4 KB costs a TLB miss (a two-level walk under a hypervisor).
// The mapping ends at the tensor's last 4 KB page, so the final partial huge page
// stays in small pages and nothing past the tensor becomes resident.
std::shared_ptr<const void> allocate_huge_page_aligned(size_t bytes) {
  const size_t length = (bytes + 4095) / 4096 * 4096;
  void* mapping = ::mmap(nullptr, length + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<uintptr_t>(mapping);
  const uintptr_t aligned = (begin + huge_page - 1) / huge_page * huge_page;
  if (aligned > begin) ::munmap(mapping, aligned - begin);
  if (const uintptr_t end = begin + length + huge_page; end > aligned + length)
    ::munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  void* memory = reinterpret_cast<void*>(aligned);
  ::madvise(memory, length, MADV_HUGEPAGE);  // advice only: without THP, small pages
  return {memory, [length](const void* p) { ::munmap(const_cast<void*>(p), length); }};
}

}  // namespace

Tensor Tensor::empty(Shape shape, DType dtype) {
  SHARDLM_CHECK(shape.numel() >= 0, "tensor shape ", shape.to_string(), " has a negative dimension");
  size_t bytes = dtype_bytes(dtype, shape.numel());
  size_t rounded = (bytes + 63) / 64 * 64;
  std::shared_ptr<const void> owner;
  if (bytes >= huge_page) {
    owner = allocate_huge_page_aligned(bytes);
  } else if (void* memory = rounded ? std::aligned_alloc(64, rounded) : nullptr) {
    owner.reset(memory, [](const void* p) { std::free(const_cast<void*>(p)); });
  }
  if (rounded && !owner)
    fail("out of memory allocating ", bytes, " bytes for a ", dtype_name(dtype), shape.to_string(), " tensor");
  const void* memory = owner.get();
  return wrap(std::move(owner), memory, std::move(shape), dtype, /*writable=*/true);
}

Tensor HostArena::empty(Shape shape, DType dtype) {
  SHARDLM_CHECK(shape.numel() >= 0, "tensor shape ", shape.to_string(), " has a negative dimension");
  const size_t bytes = dtype_bytes(dtype, shape.numel()), rounded = (bytes + 63) / 64 * 64;
  if (bytes > largest_carved) return Tensor::empty(std::move(shape), dtype);
  if (!chunk_ || used_ + rounded > chunk_bytes) {
    chunk_ = allocate_huge_page_aligned(chunk_bytes);
    if (!chunk_) fail("out of memory reserving a ", chunk_bytes >> 20, " MB arena for weights");
    used_ = 0;
  }
  const void* memory = static_cast<const std::byte*>(chunk_.get()) + used_;
  used_ += rounded;
  return Tensor::wrap(chunk_, memory, std::move(shape), dtype, /*writable=*/true);
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor tensor = empty(std::move(shape), dtype);
  if (tensor.nbytes()) std::memset(tensor.mutable_raw(), 0, tensor.nbytes());
  return tensor;
}

Tensor Tensor::wrap(std::shared_ptr<const void> owner, const void* data, Shape shape, DType dtype,
                    bool writable, Device device) {
  Tensor tensor;
  tensor.owner_ = std::move(owner);
  tensor.data_ = data;
  tensor.shape_ = std::move(shape);
  tensor.dtype_ = dtype;
  tensor.device_ = device;
  tensor.writable_ = writable;
  return tensor;
}

Tensor Tensor::from_f32(std::span<const float> values, Shape shape) {
  SHARDLM_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_f32: ", values.size(),
                " values do not fill shape ", shape.to_string());
  Tensor tensor = zeros(std::move(shape), DType::f32);
  if (!values.empty()) std::memcpy(tensor.mutable_raw(), values.data(), values.size_bytes());
  return tensor;
}

Tensor Tensor::from_i32(std::span<const int32_t> values, Shape shape) {
  SHARDLM_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_i32: ", values.size(),
                " values do not fill shape ", shape.to_string());
  Tensor tensor = zeros(std::move(shape), DType::i32);
  if (!values.empty()) std::memcpy(tensor.mutable_raw(), values.data(), values.size_bytes());
  return tensor;
}

void* Tensor::mutable_raw() const {
  SHARDLM_CHECK(writable_, "tensor ", describe(), " is read-only (memory-mapped weights); copy it first");
  return const_cast<void*>(data_);
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  SHARDLM_CHECK(shape_.rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                "slice_rows [", begin, ", ", end, ") out of range for ", describe());
  Shape sliced = shape_;
  sliced[0] = end - begin;
  size_t row_bytes = shape_[0] ? nbytes() / static_cast<size_t>(shape_[0]) : 0;
  Tensor rows = wrap(owner_, static_cast<const std::byte*>(data_) + row_bytes * static_cast<size_t>(begin),
                     std::move(sliced), dtype_, writable_, device_);
  if (block_scales_) rows.block_scales_ = std::make_shared<const Tensor>(block_scales_->slice_rows(begin, end));
  return rows;
}

Tensor Tensor::with_block_scales(Tensor scales) const {
  SHARDLM_CHECK((dtype_ == DType::i8 || dtype_ == DType::i4) && shape_.rank() == 2 && shape_[1] % quant_block == 0,
                "block scales need an int8 or int4 [out, in] weight with in a multiple of ", quant_block, ", not ",
                describe());
  const Shape expected{shape_[0], shape_[1] / quant_block};
  SHARDLM_CHECK(scales.dtype() == DType::f16 && scales.shape() == expected,
                "block scales of ", describe(), " must be float16[", shape_[0], ", ", shape_[1] / quant_block,
                "], not ", scales.describe());
  Tensor result = *this;
  result.block_scales_ = std::make_shared<const Tensor>(std::move(scales));
  return result;
}

const Tensor& Tensor::block_scales() const {
  SHARDLM_CHECK(block_scales_ != nullptr, describe(), " has no quantization block scales");
  return *block_scales_;
}

Tensor Tensor::reshape(Shape shape) const {
  SHARDLM_CHECK(shape.numel() == numel(), "cannot reshape ", describe(), " to ", shape.to_string());
  return wrap(owner_, data_, std::move(shape), dtype_, writable_, device_);
}

Tensor Tensor::view_bytes(size_t byte_offset, Shape shape, DType dtype) const {
  size_t bytes = dtype_bytes(dtype, shape.numel());
  SHARDLM_CHECK(byte_offset + bytes <= nbytes(), "view of ", bytes, " bytes at offset ", byte_offset,
                " does not fit in ", describe());
  return wrap(owner_, static_cast<const std::byte*>(data_) + byte_offset, std::move(shape), dtype, writable_, device_);
}

Tensor Tensor::to_dtype(DType dtype) const {
  SHARDLM_CHECK(device_.kind == DeviceKind::cpu, "to_dtype of ", describe(), " on ", device_.to_string(),
                ": only host tensors convert; copy it to the host first");
  Tensor result = zeros(shape_, dtype);
  if (dtype == dtype_) {
    std::memcpy(result.mutable_raw(), data_, nbytes());
    return result;
  }
  SHARDLM_CHECK(is_floating(dtype) && is_floating(dtype_), "cannot convert ", describe(), " to ",
                dtype_name(dtype));
  if (dtype_ == DType::f32) {
    convert_from_f32(data<float>(), result.mutable_raw(), dtype, static_cast<size_t>(numel()));
  } else if (dtype == DType::f32) {
    convert_to_f32(data_, dtype_, result.mutable_data<float>(), static_cast<size_t>(numel()));
  } else {
    Tensor widened = to_dtype(DType::f32);
    convert_from_f32(widened.data<float>(), result.mutable_raw(), dtype, static_cast<size_t>(numel()));
  }
  return result;
}

Tensor Tensor::clone() const { return to_dtype(dtype_); }

std::string Tensor::describe() const { return str_cat(dtype_name(dtype_), shape_.to_string()); }

}  // namespace shardlm
