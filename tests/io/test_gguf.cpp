// The GGUF reader against blocks.gguf, written by Python's gguf package
// (tests/data/gguf/make_blocks_gguf.py): its metadata of every value type, and each
// weight type's random blocks decoded by our scalar reference against gguf.quants'
// decoding of the same bytes (stored beside them as "<name>.expected"). Then malformed
// files made from it: each refused with an error naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "io/gguf.h"
#include "io/model_resolution.h"

namespace shardlm::io {
namespace {

const std::string golden = std::string(SHARDLM_TEST_DATA_DIR) + "/gguf/blocks.gguf";

TEST(Gguf, ReadsMetadataOfEveryValueType) {
  const GgufFile file = GgufFile::open(golden);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_string("general.name"), "shardlm block golden");
  EXPECT_EQ(file.get_integer("test.uint32"), 4000000000);
  EXPECT_EQ(file.get_integer("test.int32"), -7);
  EXPECT_EQ(file.get_number("test.float32"), 0.5);
  EXPECT_EQ(file.get_number("test.int32"), -7.0);
  EXPECT_TRUE(file.get_bool("test.bool"));
  EXPECT_EQ(file.get_integer("test.uint64"), int64_t{1} << 40);
  EXPECT_EQ(file.get_integer("test.int64"), -(int64_t{1} << 40));
  EXPECT_EQ(file.get_number("test.float64"), 0.25);
  EXPECT_EQ(file.get_integer("test.uint8"), 200);
  EXPECT_EQ(file.get_integer("test.int8"), -100);
  EXPECT_EQ(file.get_integer("test.uint16"), 60000);
  EXPECT_EQ(file.get_integer("test.int16"), -30000);
  EXPECT_EQ(file.get_strings("test.strings"), (std::vector<std::string>{"a", "bc", "", "\xc3\xa9t\xc3\xa9"}));
  EXPECT_EQ(file.get_integers("test.int32s"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(file.get_numbers("test.float32s"), (std::vector<double>{0.5, -1.5}));
  EXPECT_THROW(file.get_string("test.int32"), Error);
  EXPECT_THROW(file.get_integer("test.strings"), Error);
  try {
    file.get_integer("no.such.key");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("metadata key 'no.such.key' is missing"), std::string::npos);
  }
}

// Each type's blocks, decoded, equal gguf.quants' decoding: the same f32 arithmetic in
// the same order, so to the last bit but for the rounding of a product's order.
TEST(Gguf, EveryReadableTypeDecodesAsGgufPyDoes) {
  const GgufFile file = GgufFile::open(golden);
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q6_k"}) {
    SCOPED_TRACE(name);
    const Tensor decoded = file.dequantized(name);
    const std::string expected_name = std::string(name) == "f32" ? "f32" : std::string(name) + ".expected";
    const Tensor expected = file.dequantized(expected_name);
    ASSERT_EQ(decoded.shape(), expected.shape());
    EXPECT_EQ(decoded.shape()[0], 3);
    const float* got = decoded.data<float>();
    const float* want = expected.data<float>();
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < decoded.numel(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    }
    EXPECT_GT(scale, 0.0);
    EXPECT_LE(worst, 1e-6 * scale) << "largest difference " << worst << " of values up to " << scale;
  }
  EXPECT_EQ(file.tensor_info("q4_k").type.name, std::string("Q4_K"));
  EXPECT_EQ(file.tensor_info("q4_k").shape(), (Shape{3, 512}));
  EXPECT_EQ(file.tensor_bytes("q4_k").size(), 3u * 2 * 144);
}

// What the kernels read (GgufFile::weight) stands for the same values: float types and
// k-quants as stored, Q8_0, Q5_0 and Q4_0 as int8 or int4 with the blocks' scales apart.
TEST(Gguf, WeightsAsTheKernelsReadThemHoldTheSameValues) {
  const GgufFile file = GgufFile::open(golden);
  const std::pair<const char*, DType> types[] = {{"f32", DType::f32},   {"f16", DType::f16},   {"bf16", DType::bf16},
                                                 {"q8_0", DType::i8},   {"q5_0", DType::i8},   {"q4_0", DType::i4},
                                                 {"q4_k", DType::q4_k}, {"q6_k", DType::q6_k}};
  for (const auto& [name, dtype] : types) {
    SCOPED_TRACE(name);
    const Tensor weight = file.weight(name);
    EXPECT_EQ(weight.dtype(), dtype);
    EXPECT_EQ(weight.quantized(), dtype == DType::i8 || dtype == DType::i4);
    const bool stored = is_floating(dtype) || is_ggml_blocks(dtype);
    EXPECT_EQ(weight.raw() == static_cast<const void*>(file.tensor_bytes(name).data()), stored) << "a view of the file";
    const Tensor values = dequantize_weight(weight), expected = file.dequantized(name);
    ASSERT_EQ(values.shape(), expected.shape());
    for (int64_t i = 0; i < values.numel(); ++i) ASSERT_EQ(values.data<float>()[i], expected.data<float>()[i]) << i;
  }
}

// The golden file's bytes, to break.
std::vector<std::byte> golden_bytes() {
  const ByteRegion region = map_file(golden);
  return {region.bytes.begin(), region.bytes.end()};
}

std::string error_of(const std::vector<std::byte>& bytes) {
  try {
    GgufFile::parse(ByteRegion{nullptr, {bytes.data(), bytes.size()}}, "broken.gguf");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// Where the first tensor info starts: after the header and the metadata.
size_t offset_of(const std::vector<std::byte>& bytes, const std::string& text) {
  const auto* begin = reinterpret_cast<const char*>(bytes.data());
  const std::string_view all(begin, bytes.size());
  const size_t found = all.find(text);
  EXPECT_NE(found, std::string_view::npos) << text;
  return found;
}

TEST(Gguf, MalformedFilesAreRefusedNamingWhatIsWrong) {
  const std::vector<std::byte> bytes = golden_bytes();
  // Truncated: inside the header, and inside the data.
  // Cut inside the metadata: too few bytes left for the keys it counts, or inside one.
  EXPECT_NE(error_of({bytes.begin(), bytes.begin() + 100}).find("the metadata count is 16, more than the 76 bytes "
                                                                 "left could hold: the file is truncated"),
            std::string::npos);
  EXPECT_NE(error_of({bytes.begin(), bytes.begin() + 300})
                .find("the file ends inside a metadata key (offset 293 of 300 bytes): it is truncated"),
            std::string::npos)
      << error_of({bytes.begin(), bytes.begin() + 300});
  EXPECT_NE(error_of({bytes.begin(), bytes.end() - 100}).find("ends past the data section"), std::string::npos);
  EXPECT_NE(error_of({bytes.begin(), bytes.begin() + 3}).find("not a GGUF file"), std::string::npos);

  std::vector<std::byte> version = bytes;
  version[4] = std::byte{9};
  EXPECT_NE(error_of(version).find("GGUF version 9 is not supported"), std::string::npos);

  // An absurd tensor count, then an absurd metadata count.
  std::vector<std::byte> count = bytes;
  const uint64_t absurd = uint64_t{1} << 62;
  std::memcpy(count.data() + 8, &absurd, 8);
  EXPECT_NE(error_of(count).find("tensors, over the limit"), std::string::npos) << error_of(count);
  const uint64_t many = 500000;
  std::memcpy(count.data() + 8, &many, 8);
  EXPECT_NE(error_of(count).find("the tensor count is 500000, more than"), std::string::npos) << error_of(count);
  count = bytes;
  std::memcpy(count.data() + 16, &many, 8);
  EXPECT_NE(error_of(count).find("the metadata count is 500000"), std::string::npos) << error_of(count);

  // The tensor "q8_0": name (8-byte length, 4 bytes), dimension count, 2 dimensions, type, offset.
  const size_t q8 = offset_of(bytes, std::string("\x04\0\0\0\0\0\0\0q8_0", 12)) + 12;
  std::vector<std::byte> type = bytes;
  const uint32_t unknown_type = 77, unreadable_type = 13;  // no such ggml type; Q5_K
  std::memcpy(type.data() + q8 + 4 + 16, &unknown_type, 4);
  EXPECT_NE(error_of(type).find("tensor 'q8_0' has type id 77, which ggml never defined"), std::string::npos)
      << error_of(type);
  std::memcpy(type.data() + q8 + 4 + 16, &unreadable_type, 4);
  // Q5_K blocks are 256 values: rows of 64 are not whole blocks.
  EXPECT_NE(error_of(type).find("is Q5_K with rows of 64 values, not whole blocks of 256"), std::string::npos)
      << error_of(type);

  std::vector<std::byte> past = bytes;
  const uint64_t far = uint64_t{1} << 40;
  std::memcpy(past.data() + q8 + 4 + 16 + 4, &far, 8);
  EXPECT_NE(error_of(past).find("tensor 'q8_0' (Q8_0, 204 bytes at offset 1099511627776) ends past the data"),
            std::string::npos)
      << error_of(past);

  std::vector<std::byte> dims = bytes;
  const uint32_t seven = 7;
  std::memcpy(dims.data() + q8, &seven, 4);
  EXPECT_NE(error_of(dims).find("tensor 'q8_0' has 7 dimensions"), std::string::npos) << error_of(dims);
}

TEST(Gguf, AnUnreadableTypeIsRefusedByName) {
  // A Q5_K tensor of one whole block: the file is valid, the type is not one we decode.
  std::vector<std::byte> bytes = golden_bytes();
  const size_t q4k = offset_of(bytes, std::string("\x04\0\0\0\0\0\0\0q4_k", 12)) + 12;
  const uint32_t q5_k = 13;
  std::memcpy(bytes.data() + q4k + 4 + 16, &q5_k, 4);
  // Q4_K's 864 bytes hold 2 * 3 blocks of Q4_K (144) and fewer Q5_K (176) blocks: parse
  // checks they fit, and the file stays valid.
  const GgufFile file = GgufFile::parse(ByteRegion{nullptr, {bytes.data(), bytes.size()}}, "q5k.gguf");
  try {
    file.dequantized("q4_k");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("tensor 'q4_k' is Q5_K, which shardlm cannot read (it reads F32, F16, "
                                             "BF16, Q8_0, Q5_0, Q4_0, Q4_K, Q6_K)"),
              std::string::npos)
        << error.what();
  }
}

// blocks.gguf says it is a Llama but holds no Llama's hyper-parameters.
TEST(Gguf, AModelWithoutItsHyperParametersIsRefusedNamingTheKey) {
  try {
    resolve_model(golden, {});
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("metadata key 'llama.attention.head_count' is missing"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace shardlm::io
