#pragma once
// Tensor: a typed, shaped, contiguous view of memory that some owner keeps alive.
// Owners: host memory allocated here, a read-only memory-mapped file, or memory
// embedded in the binary. Views (slice_rows, reshape) share the owner; nothing
// here copies tensor data except the explicitly named copy functions.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace shardlm {

enum class DeviceKind : uint8_t { cpu, cuda, pjrt };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string to_string() const;
};

class Tensor {
 public:
  Tensor() = default;

  // New zero-filled host tensor, 64-byte aligned.
  static Tensor zeros(Shape shape, DType dtype);
  // New host tensor with undefined contents: large ones cost no resident memory
  // until their pages are written (KV caches, activation arenas).
  static Tensor empty(Shape shape, DType dtype);
  // Wraps memory kept alive by `owner`. `writable` is false for mapped files.
  static Tensor wrap(std::shared_ptr<const void> owner, const void* data, Shape shape, DType dtype,
                     bool writable, Device device = {});
  // Host tensor holding a copy of `values`.
  static Tensor from_f32(std::span<const float> values, Shape shape);
  static Tensor from_i32(std::span<const int32_t> values, Shape shape);

  bool defined() const { return data_ != nullptr || shape_.numel() == 0; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return dtype_bytes(dtype_, numel()); }
  bool writable() const { return writable_; }

  const void* raw() const { return data_; }
  // What keeps the memory alive; a view's raw() lies inside it (a pjrt device tensor's
  // owner is its buffer's handle, and raw() - owner() the view's byte offset).
  const void* owner() const { return owner_.get(); }
  void* mutable_raw() const;
  template <typename T>
  const T* data() const { return static_cast<const T*>(data_); }
  template <typename T>
  T* mutable_data() const { return static_cast<T*>(mutable_raw()); }

  // Rows [begin, end) of the outermost dimension, sharing memory.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // The same memory seen with another shape of equal element count.
  Tensor reshape(Shape shape) const;
  // A tensor of `shape` and `dtype` starting `byte_offset` bytes into this one's memory
  // (an arena carved into activations); it must fit.
  Tensor view_bytes(size_t byte_offset, Shape shape, DType dtype) const;

  // Explicit copies.
  Tensor to_dtype(DType dtype) const;  // floating types only; returns a new host tensor
  Tensor clone() const;

  std::string describe() const;  // "bfloat16[1024, 64]"

  // Weight-only int8 quantization: an i8 [out, in] weight carries f16 scales
  // [out, in / quant_block], one per block of `quant_block` consecutive elements of a
  // row; element (o, i) stands for weight[o, i] * scales[o, i / quant_block].
  static constexpr int64_t quant_block = 32;
  // From this size on, empty() maps the tensor 2 MB-aligned for transparent huge pages.
  static constexpr size_t huge_page_bytes = size_t{2} << 20;
  Tensor with_block_scales(Tensor scales) const;
  bool quantized() const { return block_scales_ != nullptr; }
  const Tensor& block_scales() const;

 private:
  std::shared_ptr<const void> owner_;
  const void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_;
  bool writable_ = false;
  std::shared_ptr<const Tensor> block_scales_;
};

// Host tensors side by side in shared 2 MB-aligned mappings marked for transparent huge
// pages. A tensor of its own mapping keeps its last partial huge page in small pages,
// and a weight under 2 MB (an int8 k/v projection, block scales) is all small pages;
// carved out of a shared chunk, every weight converted or copied at load sits in huge
// pages. Each tensor keeps its chunk alive; a chunk's untouched pages are not resident.
class HostArena {
 public:
  static constexpr size_t chunk_bytes = size_t{256} << 20;
  // Larger tensors get a mapping of their own (Tensor::empty): their partial last huge
  // page is a small share of them.
  static constexpr size_t largest_carved = chunk_bytes / 4;

  // A new tensor with undefined contents, 64-byte aligned.
  Tensor empty(Shape shape, DType dtype);

 private:
  std::shared_ptr<const void> chunk_;
  size_t used_ = 0;
};

}  // namespace shardlm
