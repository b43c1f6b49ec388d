#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace shardlm::io {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() /
                 ("shardlm_safetensors_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  std::string path(const std::string& name) const { return (directory_ / name).string(); }

  // A file with `header` as its JSON header and `data_bytes` zero bytes of data.
  std::string write_raw(const std::string& name, const std::string& header, size_t data_bytes,
                        std::optional<uint64_t> declared_length = {}) {
    std::ofstream out(path(name), std::ios::binary);
    uint64_t length = declared_length.value_or(header.size());
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((length >> (8 * i)) & 0xff));
    out << header << std::string(data_bytes, '\0');
    return path(name);
  }

  // Expects opening `file` to throw an Error whose message has every one of `needles`.
  static void expect_error(const std::string& file, std::initializer_list<std::string> needles) {
    try {
      SafetensorsFile::open(file);
      FAIL() << "no error for " << file;
    } catch (const Error& error) {
      for (const std::string& needle : needles)
        EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
            << "message '" << error.what() << "' lacks '" << needle << "'";
    }
  }

  fs::path directory_;
};

TEST_F(SafetensorsTest, WritesAndReadsBack) {
  std::vector<float> values{1, 2, 3, 4, 5, 6};
  std::map<std::string, Tensor> tensors{
      {"a", Tensor::from_f32(values, {2, 3})},
      {"b", Tensor::from_f32(values, {6}).to_dtype(DType::bf16)},
      {"c", Tensor::from_i32(std::vector<int32_t>{7, 8, 9}, {3})},
  };
  write_safetensors(path("x.safetensors"), tensors, {{"format", "pt"}});
  SafetensorsFile file = SafetensorsFile::open(path("x.safetensors"));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.names(), (std::vector<std::string>{"a", "b", "c"}));
  Tensor a = file.tensor("a");
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_FALSE(a.writable());
  EXPECT_EQ(a.data<float>()[5], 6.0f);
  EXPECT_EQ(file.tensor("b").to_dtype(DType::f32).data<float>()[3], 4.0f);
  EXPECT_EQ(file.tensor("c").data<int32_t>()[2], 9);
}

TEST_F(SafetensorsTest, ReadsARealCheckpoint) {
  SafetensorsFile file = SafetensorsFile::open(std::string(SHARDLM_TEST_DATA_DIR) + "/fixtures/qwen3-tiny-bf16/model.safetensors");
  EXPECT_EQ(file.info("model.embed_tokens.weight").dtype, DType::bf16);
  EXPECT_EQ(file.info("model.embed_tokens.weight").shape, (Shape{1024, 64}));
  EXPECT_FALSE(file.metadata().empty());
}

TEST_F(SafetensorsTest, TruncatedFile) {
  std::string file = write_raw("t.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  expect_error(file, {"t.safetensors", "w", "past the data section"});
}

TEST_F(SafetensorsTest, FileShorterThanLengthPrefix) {
  std::ofstream(path("short.safetensors")) << "abc";
  expect_error(path("short.safetensors"), {"short.safetensors", "too short"});
}

TEST_F(SafetensorsTest, HeaderLengthPastEndOfFile) {
  std::string file = write_raw("h.safetensors", "{}", 0, /*declared_length=*/4096);
  expect_error(file, {"h.safetensors", "header length 4096", "truncated"});
}

TEST_F(SafetensorsTest, HugeHeaderLengthIsRefusedBeforeAllocating) {
  std::string file = write_raw("huge.safetensors", "{}", 0, /*declared_length=*/uint64_t{1} << 62);
  expect_error(file, {"huge.safetensors", "exceeds"});
}

TEST_F(SafetensorsTest, BadJson) {
  expect_error(write_raw("j.safetensors", R"({"w": {"dtype": "F32",)", 0), {"j.safetensors", "not valid JSON"});
  expect_error(write_raw("k.safetensors", R"([1, 2])", 0), {"k.safetensors", "not a JSON object"});
}

TEST_F(SafetensorsTest, UnknownDtype) {
  std::string file = write_raw("d.safetensors", R"({"w":{"dtype":"F42","shape":[1],"data_offsets":[0,4]}})", 4);
  expect_error(file, {"d.safetensors", "'w'", "F42", "not supported"});
}

TEST_F(SafetensorsTest, OverlappingOffsets) {
  std::string file = write_raw(
      "o.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12);
  expect_error(file, {"o.safetensors", "'a'", "'b'", "overlap"});
}

TEST_F(SafetensorsTest, OutOfRangeOffsets) {
  std::string file = write_raw("r.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 12);
  expect_error(file, {"r.safetensors", "'w'", "past the data section"});
  std::string reversed =
      write_raw("rev.safetensors", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 12);
  expect_error(reversed, {"rev.safetensors", "reversed"});
  std::string negative =
      write_raw("neg.safetensors", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 12);
  expect_error(negative, {"neg.safetensors", "data_offsets"});
}

TEST_F(SafetensorsTest, ShapeSizeMismatch) {
  std::string file = write_raw("s.safetensors", R"({"w":{"dtype":"BF16","shape":[3,3],"data_offsets":[0,16]}})", 16);
  expect_error(file, {"s.safetensors", "'w'", "[3, 3]", "18 bytes", "16"});
  std::string overflow = write_raw(
      "so.safetensors",
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}})", 16);
  expect_error(overflow, {"so.safetensors", "overflows"});
}

TEST_F(SafetensorsTest, MissingTensorInCheckpoint) {
  write_safetensors(path("model.safetensors"), {{"present", Tensor::zeros({2}, DType::f32)}});
  Checkpoint checkpoint = Checkpoint::open(ModelFiles::directory(directory_.string()));
  EXPECT_TRUE(checkpoint.contains("present"));
  try {
    checkpoint.tensor("model.norm.weight");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'model.norm.weight' not found"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(directory_.string()), std::string::npos);
  }
}

TEST_F(SafetensorsTest, ShardedCheckpoint) {
  write_safetensors(path("model-00001-of-00002.safetensors"), {{"a", Tensor::zeros({2}, DType::f32)}});
  write_safetensors(path("model-00002-of-00002.safetensors"), {{"b", Tensor::zeros({3}, DType::f32)}});
  std::ofstream(path("model.safetensors.index.json"))
      << R"({"metadata":{"total_size":20},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
  Checkpoint checkpoint = Checkpoint::open(ModelFiles::directory(directory_.string()));
  EXPECT_EQ(checkpoint.tensor("b").shape(), (Shape{3}));
  EXPECT_EQ(checkpoint.names(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(SafetensorsTest, MissingShard) {
  write_safetensors(path("model-00001-of-00002.safetensors"), {{"a", Tensor::zeros({2}, DType::f32)}});
  std::ofstream(path("model.safetensors.index.json"))
      << R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
  try {
    Checkpoint::open(ModelFiles::directory(directory_.string()));
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("model-00002-of-00002.safetensors not found"), std::string::npos)
        << error.what();
  }
}

TEST_F(SafetensorsTest, IndexNamingATensorTheShardLacks) {
  write_safetensors(path("shard.safetensors"), {{"a", Tensor::zeros({2}, DType::f32)}});
  std::ofstream(path("model.safetensors.index.json")) << R"({"weight_map":{"a":"shard.safetensors","z":"shard.safetensors"}})";
  EXPECT_THROW(Checkpoint::open(ModelFiles::directory(directory_.string())), Error);
}

TEST_F(SafetensorsTest, NoWeightsAtAll) {
  try {
    Checkpoint::open(ModelFiles::directory(directory_.string()));
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("model.safetensors"), std::string::npos);
  }
}

TEST_F(SafetensorsTest, MissingFile) { expect_error(path("absent.safetensors"), {"absent.safetensors", "cannot open"}); }

}  // namespace
}  // namespace shardlm::io
