#include <gtest/gtest.h>

#include "core/tensor.h"

namespace shardlm {
namespace {

TEST(Tensor, ZerosAreAlignedAndZero) {
  Tensor t = Tensor::zeros({3, 5}, DType::f32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
}

TEST(Tensor, SliceAndReshapeShareMemory) {
  std::vector<float> values{0, 1, 2, 3, 4, 5};
  Tensor t = Tensor::from_f32(values, {3, 2});
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.data<float>()[0], 2.0f);
  rows.mutable_data<float>()[0] = 42;
  EXPECT_EQ(t.data<float>()[2], 42.0f);
  EXPECT_EQ(t.reshape({6}).data<float>()[2], 42.0f);
  EXPECT_THROW(t.reshape({4}), Error);
  EXPECT_THROW(t.slice_rows(2, 4), Error);
}

TEST(Tensor, ReadOnlyTensorsRefuseWrites) {
  static const float constant[2] = {1, 2};
  Tensor t = Tensor::wrap(nullptr, constant, {2}, DType::f32, /*writable=*/false);
  EXPECT_EQ(t.data<float>()[1], 2.0f);
  EXPECT_THROW(t.mutable_data<float>(), Error);
}

TEST(Tensor, ConvertsBetweenFloatTypes) {
  std::vector<float> values{1.0f, -2.5f, 3.140625f};
  Tensor bf16 = Tensor::from_f32(values, {3}).to_dtype(DType::bf16);
  EXPECT_EQ(bf16.dtype(), DType::bf16);
  Tensor f16 = bf16.to_dtype(DType::f16);
  Tensor back = f16.to_dtype(DType::f32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back.data<float>()[i], values[i]);
  EXPECT_THROW(Tensor::from_i32(std::vector<int32_t>{1}, {1}).to_dtype(DType::f32), Error);
}

// Carved tensors lie side by side in one 2 MB-aligned chunk, 64-byte aligned, each
// keeping the chunk alive after the arena is gone; a full chunk starts another, and a
// tensor past largest_carved gets its own mapping.
TEST(HostArena, CarvesTensorsSideBySideInHugePageChunks) {
  Tensor first, second, third, large;
  {
    HostArena arena;
    first = arena.empty({100}, DType::bf16);   // 200 bytes, rounded to 256
    second = arena.empty({3, 5}, DType::f32);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first.raw()) % Tensor::huge_page_bytes, 0u);
    EXPECT_EQ(static_cast<const std::byte*>(second.raw()) - static_cast<const std::byte*>(first.raw()), 256);
    first.mutable_data<uint16_t>()[99] = 7;
    second.mutable_data<float>()[14] = 2.5f;
    // Quarter-chunk tensors: three more fit beside the two, a fourth starts a new chunk.
    const int64_t quarter = static_cast<int64_t>(HostArena::largest_carved);
    const auto* start = static_cast<const std::byte*>(first.raw());
    for (int i = 0; i < 3; ++i) EXPECT_EQ(arena.empty({quarter}, DType::i8).raw(), start + 320 + i * quarter);
    third = arena.empty({quarter}, DType::i8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(third.raw()) % Tensor::huge_page_bytes, 0u);
    large = arena.empty({quarter + 1}, DType::i8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(large.raw()) % Tensor::huge_page_bytes, 0u);
  }
  EXPECT_EQ(first.data<uint16_t>()[99], 7);
  EXPECT_EQ(second.data<float>()[14], 2.5f);
  third.mutable_data<int8_t>()[0] = 1;
  large.mutable_data<int8_t>()[large.numel() - 1] = 1;
  EXPECT_THROW(HostArena().empty({-1}, DType::f32), Error);
}

}  // namespace
}  // namespace shardlm
