// The PJRT client against a real plugin: XLA's CPU plugin (pjrt_c_api_cpu_plugin.so from the
// lammps-jax-pjrt-cpu wheel) named by SHARDLM_PJRT_PLUGIN. Without it every test that needs
// the plugin is skipped, saying why.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backends/pjrt/pjrt_backend.h"
#include "backends/pjrt/pjrt_client.h"

namespace shardlm::backends::pjrt {
namespace {

// The message of the `Exception` that `action` throws, or "(no error)".
template <typename Exception = Error, typename Action>
std::string error_of(Action action) {
  try {
    action();
  } catch (const Exception& error) {
    return error.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const char* const add_program = R"(module {
  func.func public @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.add %a, %b : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
})";

// The cache is donated: the output is written into the input's memory.
const char* const donation_program = R"(module {
  func.func public @main(%cache: tensor<8xf32> {tf.aliasing_output = 0 : i32}, %update: tensor<2xf32>,
                         %position: tensor<i32>) -> tensor<8xf32> {
    %0 = "stablehlo.dynamic_update_slice"(%cache, %update, %position)
        : (tensor<8xf32>, tensor<2xf32>, tensor<i32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
})";

// x split over two devices, the sum gathered back onto both.
const char* const spmd_program = R"(module {
  func.func public @main(%x: tensor<4xf32> {mhlo.sharding = "{devices=[2]0,1}"})
      -> (tensor<4xf32> {mhlo.sharding = "{replicated}"}) {
    %0 = stablehlo.add %x, %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
})";

std::vector<float> download(const Buffer& buffer) {
  std::vector<float> values(static_cast<size_t>(buffer.shape().numel()));
  buffer.to_host(values.data(), values.size() * sizeof(float));
  return values;
}

// Plugins wrong in one way each (fake_pjrt_plugin.cpp): refused with the file named and
// what to do, before anything of theirs beyond the version is called.
TEST(PjrtPluginLoad, AnotherMajorVersionIsRefused) {
  const std::string message = error_of([] { Plugin::load(SHARDLM_FAKE_PJRT_FLAW_1); });
  EXPECT_TRUE(contains(message, SHARDLM_FAKE_PJRT_FLAW_1)) << message;
  EXPECT_TRUE(contains(message, "speaks PJRT API 1.0")) << message;
  EXPECT_TRUE(contains(message, "use a plugin built for PJRT 0.x")) << message;
}

TEST(PjrtPluginLoad, AnOlderMinorVersionIsRefused) {
  const std::string message = error_of([] { Plugin::load(SHARDLM_FAKE_PJRT_FLAW_2); });
  EXPECT_TRUE(contains(message, SHARDLM_FAKE_PJRT_FLAW_2)) << message;
  EXPECT_TRUE(contains(message, "0.40, older than 0.57")) << message;
  EXPECT_TRUE(contains(message, "use a newer plugin")) << message;
}

TEST(PjrtPluginLoad, AShortFunctionTableIsRefused) {
  const std::string message = error_of([] { Plugin::load(SHARDLM_FAKE_PJRT_FLAW_3); });
  EXPECT_TRUE(contains(message, SHARDLM_FAKE_PJRT_FLAW_3)) << message;
  EXPECT_TRUE(contains(message, "PJRT_Buffer_ReadyEvent")) << message;
  EXPECT_TRUE(contains(message, "use a newer plugin")) << message;
}

TEST(PjrtPluginLoad, AClientThatCannotStartCarriesThePluginsMessageAndCode) {
  const std::shared_ptr<Plugin> plugin = Plugin::load(SHARDLM_FAKE_PJRT_FLAW_4);
  try {
    Client client(plugin, {});
    ADD_FAILURE() << "the fake plugin's client started";
  } catch (const PjrtError& error) {
    const std::string message = error.what();
    EXPECT_TRUE(contains(message, "PJRT_Client_Create")) << message;
    EXPECT_TRUE(contains(message, "no device found")) << message;
    EXPECT_EQ(error.code(), 5);  // absl NOT_FOUND
  }
}

class PjrtClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string searched;
    const std::string path = find_plugin("pjrt", "", &searched);
    if (path.empty())
      GTEST_SKIP() << "no PJRT plugin (looked at " << searched << "; scripts/fetch_pjrt_plugin.sh installs XLA:CPU's, or point "
                   << "SHARDLM_PJRT_PLUGIN at pjrt_c_api_cpu_plugin.so from the lammps-jax-pjrt-cpu wheel)";
    if (!std::filesystem::is_regular_file(path))
      GTEST_SKIP() << "SHARDLM_PJRT_PLUGIN=" << path << " is not a file";
    plugin_ = Plugin::load(path);
    client_ = std::make_unique<Client>(plugin_, std::vector<NamedOption>{{"cpu_device_count", int64_t{2}}});
  }

  std::unique_ptr<Buffer> upload(const std::vector<float>& values, const Shape& shape, int device = 0) {
    return client_->upload(values.data(), DType::f32, shape, device);
  }

  std::shared_ptr<Plugin> plugin_;
  std::unique_ptr<Client> client_;
};

TEST(PjrtCompileOptions, HandEncodedProto) {
  EXPECT_EQ(compile_options_bytes(1), std::string("\x1a\x04\x20\x01\x28\x01", 6));
  EXPECT_EQ(compile_options_bytes(4), std::string("\x1a\x06\x20\x01\x28\x04\x30\x01", 8));
  EXPECT_EQ(compile_options_bytes(127).size(), 8u);
  EXPECT_TRUE(contains(error_of([] { compile_options_bytes(128); }), "1 to 127"));
  EXPECT_TRUE(contains(error_of([] { compile_options_bytes(0); }), "1 to 127"));
}

TEST(PjrtPluginLoad, MissingFile) {
  const std::string message = error_of([] { Plugin::load("/nonexistent/pjrt_plugin.so"); });
  EXPECT_TRUE(contains(message, "/nonexistent/pjrt_plugin.so")) << message;
  EXPECT_TRUE(contains(message, "SHARDLM_PJRT_PLUGIN")) << message;
}

TEST(PjrtPluginLoad, NotASharedLibrary) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("shardlm_not_a_plugin_" + std::to_string(getpid()) + ".so"))
                               .string();
  std::ofstream(path) << "this is text, not an ELF file\n";
  const std::string message = error_of([&] { Plugin::load(path); });
  std::filesystem::remove(path);
  EXPECT_TRUE(contains(message, "cannot load PJRT plugin")) << message;
  EXPECT_TRUE(contains(message, path)) << message;
  EXPECT_TRUE(contains(message, "SHARDLM_PJRT_PLUGIN")) << message;
}

TEST(PjrtPluginLoad, SharedLibraryWithoutGetPjrtApi) {
  std::string library;
  for (const char* candidate : {"/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1",
                                "/lib/aarch64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libm.so.6"})
    if (std::filesystem::is_regular_file(candidate)) {
      library = candidate;
      break;
    }
  if (library.empty()) GTEST_SKIP() << "no libz.so.1 or libm.so.6 found to stand in for a non-plugin library";
  const std::string message = error_of([&] { Plugin::load(library); });
  EXPECT_TRUE(contains(message, library)) << message;
  EXPECT_TRUE(contains(message, "GetPjrtApi")) << message;
  EXPECT_TRUE(contains(message, "SHARDLM_PJRT_PLUGIN")) << message;
}

TEST_F(PjrtClientTest, PluginAttributesAndVersion) {
  EXPECT_EQ(plugin_->api_major(), 0);
  EXPECT_GE(plugin_->api_minor(), 57);
  EXPECT_FALSE(plugin_->attribute("stablehlo_current_version").empty());
  EXPECT_FALSE(plugin_->attribute("stablehlo_minimum_version").empty());
  EXPECT_EQ(plugin_->attribute("no such attribute"), "");
  EXPECT_EQ(Plugin::load(plugin_->path()), plugin_);  // cached, not loaded twice
}

TEST_F(PjrtClientTest, TwoCpuDevices) {
  EXPECT_EQ(client_->platform_name(), "cpu");
  EXPECT_EQ(client_->device_count(), 2);
}

TEST_F(PjrtClientTest, UploadAndDownload) {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  auto buffer = upload(values, {2, 3}, 1);
  EXPECT_EQ(buffer->shape(), Shape({2, 3}));
  EXPECT_EQ(buffer->dtype(), DType::f32);
  EXPECT_FALSE(buffer->is_deleted());
  EXPECT_EQ(download(*buffer), values);
  std::vector<float> too_small(5);
  EXPECT_TRUE(contains(error_of([&] { buffer->to_host(too_small.data(), 20); }), "24 bytes"));
  EXPECT_TRUE(contains(error_of([&] { upload(values, {2, 3}, 2); }), "2 addressable devices"));
}

TEST_F(PjrtClientTest, CompileAndExecute) {
  auto executable = client_->compile(add_program, compile_options_bytes(1));
  EXPECT_EQ(executable->num_outputs(), 1u);
  EXPECT_EQ(executable->num_devices(), 1u);
  auto a = upload({1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = upload({10, 20, 30, 40, 50, 60}, {2, 3});
  const std::vector<std::vector<PJRT_Buffer*>> arguments = {{a->get(), b->get()}};
  auto outputs = executable->execute(arguments);
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_EQ(outputs[0].size(), 1u);
  EXPECT_EQ(outputs[0][0]->shape(), Shape({2, 3}));
  EXPECT_EQ(download(*outputs[0][0]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  EXPECT_FALSE(a->is_deleted());  // not donated
}

TEST_F(PjrtClientTest, DonatedCacheIsUpdatedInPlace) {
  auto executable = client_->compile(donation_program, compile_options_bytes(1));
  auto cache = upload(std::vector<float>(8, 0.0f), {8});
  auto update = upload({5, 6}, {2});
  const int32_t position = 3;
  auto at = client_->upload(&position, DType::i32, Shape{}, 0);
  const std::vector<std::vector<PJRT_Buffer*>> arguments = {{cache->get(), update->get(), at->get()}};
  auto outputs = executable->execute(arguments);
  EXPECT_TRUE(cache->is_deleted());
  EXPECT_FALSE(update->is_deleted());
  EXPECT_EQ(download(*outputs[0][0]), (std::vector<float>{0, 0, 0, 5, 6, 0, 0, 0}));
}

TEST_F(PjrtClientTest, SerializeAndDeserialize) {
  std::string bytes;
  {
    auto executable = client_->compile(add_program, compile_options_bytes(1));
    bytes = executable->serialize();
  }
  ASSERT_FALSE(bytes.empty());
  auto reloaded = client_->deserialize(bytes);
  EXPECT_EQ(reloaded->num_outputs(), 1u);
  auto a = upload({1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = upload({0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, {2, 3});
  const std::vector<std::vector<PJRT_Buffer*>> arguments = {{a->get(), b->get()}};
  auto outputs = reloaded->execute(arguments);
  EXPECT_EQ(download(*outputs[0][0]), (std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f}));
}

TEST_F(PjrtClientTest, SpmdOverTwoDevices) {
  auto executable = client_->compile(spmd_program, compile_options_bytes(2));
  ASSERT_EQ(executable->num_devices(), 2u);
  auto first = upload({1, 2}, {2}, 0);
  auto second = upload({3, 4}, {2}, 1);
  const std::vector<std::vector<PJRT_Buffer*>> arguments = {{first->get()}, {second->get()}};
  auto outputs = executable->execute(arguments);
  ASSERT_EQ(outputs.size(), 2u);
  for (const auto& device : outputs) EXPECT_EQ(download(*device[0]), (std::vector<float>{2, 4, 6, 8}));
  const std::vector<std::vector<PJRT_Buffer*>> one_list = {{first->get()}};
  EXPECT_TRUE(contains(error_of([&] { executable->execute(one_list); }), "runs on 2 devices"));
}

TEST_F(PjrtClientTest, BadProgramIsAPjrtError) {
  int code = 0;
  std::string message;
  try {
    client_->compile("func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> { this is not mlir",
                     compile_options_bytes(1));
    message = "(no error)";
  } catch (const PjrtError& error) {
    code = error.code();
    message = error.what();
  }
  EXPECT_NE(code, 0) << message;
  EXPECT_TRUE(contains(message, "PJRT PJRT_Client_Compile (" + plugin_->path() + "): ")) << message;
  EXPECT_TRUE(contains(message, "Failed to parse")) << message;  // the plugin's own words
  EXPECT_TRUE(contains(message, "[code " + std::to_string(code) + "]")) << message;
}

TEST_F(PjrtClientTest, EmptyCompileOptionsAreRefused) {
  // The plugin would abort the process; shardlm must refuse before calling it.
  try {
    client_->compile(add_program, "");
    FAIL() << "empty compile options were accepted";
  } catch (const Error& error) {
    EXPECT_EQ(dynamic_cast<const PjrtError*>(&error), nullptr) << error.what();
    EXPECT_TRUE(contains(error.what(), "empty compile options")) << error.what();
  }
}

}  // namespace
}  // namespace shardlm::backends::pjrt
