#include <gtest/gtest.h>

#include "io/config.h"
#include "test_util.h"

namespace shardlm::io {
namespace {

void expect_config_error(const std::string& json_text, std::initializer_list<std::string> needles) {
  try {
    parse_model_config(json_text, "/models/x/config.json");
    FAIL() << "no error for " << json_text;
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("/models/x/config.json"), std::string::npos) << message;
    for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

const char* minimal_llama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":32,
  "hidden_size":64,"intermediate_size":100,"num_hidden_layers":2,"num_attention_heads":4)";

std::string with(const std::string& extra) { return std::string(minimal_llama) + extra + "}"; }

TEST(ModelConfig, ReadsRealFixtures) {
  ModelConfig qwen3 = load_model_config(ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny")));
  EXPECT_EQ(qwen3.architectures.front(), "Qwen3ForCausalLM");
  EXPECT_EQ(qwen3.head_dim, 32);
  EXPECT_EQ(qwen3.num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(qwen3.rope.theta, 1e6);
  EXPECT_TRUE(qwen3.tie_word_embeddings);
  EXPECT_EQ(qwen3.torch_dtype, DType::f32);

  ModelConfig untied = load_model_config(ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny-untied")));
  EXPECT_DOUBLE_EQ(untied.rope.theta, 1e6);  // only inside rope_parameters
  EXPECT_FALSE(untied.tie_word_embeddings);

  ModelConfig llama3 = load_model_config(ModelFiles::directory(testing::data_path("fixtures/llama3-tiny")));
  EXPECT_EQ(llama3.rope.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(llama3.rope.factor, 8.0);
  EXPECT_EQ(llama3.rope.original_max_position_embeddings, 64);

  ModelConfig glm4 = load_model_config(ModelFiles::directory(testing::data_path("fixtures/glm4-tiny")));
  EXPECT_EQ(glm4.eos_token_id, (std::vector<int64_t>{2, 3}));
  EXPECT_DOUBLE_EQ(glm4.rope.partial_rotary_factor, 0.5);
}

// transformers 5 writes rope_parameters keyed by layer type and layer_types; transformers 4
// wrote rope_theta, rope_local_base_freq, rope_scaling and sliding_window_pattern. Both
// describe gemma3-tiny's model.
TEST(ModelConfig, Gemma3InTransformers5And4Keys) {
  const ModelFiles files = ModelFiles::directory(testing::data_path("fixtures/gemma3-tiny"));
  const ModelConfig v5 = load_model_config(files);
  const ModelConfig v4 = parse_model_config(files.read_text("config_transformers4.json"), "config_transformers4.json");
  for (const ModelConfig* config : {&v5, &v4}) {
    EXPECT_EQ(config->layer_types, (std::vector<std::string>{"sliding_attention", "full_attention", "sliding_attention",
                                                             "full_attention", "sliding_attention"}));
    EXPECT_EQ(config->sliding_window, 7);
    EXPECT_EQ(config->rope.rope_type, "linear");
    EXPECT_DOUBLE_EQ(config->rope.theta, 1e6);
    EXPECT_DOUBLE_EQ(config->rope.factor, 2.0);
    ASSERT_TRUE(config->sliding_rope.has_value());
    EXPECT_EQ(config->sliding_rope->rope_type, "default");
    EXPECT_DOUBLE_EQ(config->sliding_rope->theta, 1e4);
    EXPECT_EQ(config->query_pre_attn_scalar, 20.0);
    EXPECT_EQ(config->final_logit_softcapping, 1.0);
    EXPECT_EQ(config->hidden_act, "gelu_pytorch_tanh");
    EXPECT_EQ(config->head_dim, 24);
    EXPECT_TRUE(config->tie_word_embeddings);
  }
}

// A multimodal Gemma 3 config as google/gemma-3-4b-it's: text_config states only what
// differs from Gemma3TextConfig, and the top level carries the token ids.
TEST(ModelConfig, Gemma3MultimodalConfigStatesOnlyWhatDiffers) {
  const ModelConfig config = parse_model_config(R"({"architectures": ["Gemma3ForConditionalGeneration"],
      "model_type": "gemma3", "eos_token_id": [1, 106], "boi_token_index": 255999,
      "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                      "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                      "sliding_window": 1024},
      "vision_config": {"model_type": "siglip_vision_model"}})", "c");
  EXPECT_EQ(config.architectures, std::vector<std::string>{"Gemma3ForCausalLM"});
  EXPECT_EQ(config.vocab_size, 262208);
  EXPECT_EQ(config.num_attention_heads, 8);
  EXPECT_EQ(config.num_key_value_heads, 4);
  EXPECT_EQ(config.head_dim, 256);
  EXPECT_EQ(config.hidden_size, 2560);
  EXPECT_EQ(config.eos_token_id, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(config.rope.rope_type, "linear");
  EXPECT_DOUBLE_EQ(config.sliding_rope->factor, 1.0);  // the scaling is the global layers' alone
  EXPECT_EQ(config.layer_types[5], "full_attention");
  EXPECT_THROW(parse_model_config(R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"})",
                                  "c"),
               Error);
}

// What Gemma3TextConfig sets when a key is absent, and what cannot run.
TEST(ModelConfig, Gemma3DefaultsAndRefusals) {
  const std::string gemma = R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","vocab_size":32,
      "hidden_size":64,"intermediate_size":128,"num_hidden_layers":7,"num_attention_heads":4,"num_key_value_heads":1)";
  const ModelConfig config = parse_model_config(gemma + "}", "c");
  EXPECT_EQ(config.head_dim, 256);
  EXPECT_EQ(config.sliding_window, 4096);
  EXPECT_EQ(config.layer_types[4], "sliding_attention");
  EXPECT_EQ(config.layer_types[5], "full_attention");  // every 6th
  EXPECT_EQ(config.layer_types[6], "sliding_attention");
  EXPECT_DOUBLE_EQ(config.rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(config.sliding_rope->theta, 1e4);
  EXPECT_EQ(config.query_pre_attn_scalar, 256.0);
  EXPECT_FALSE(config.final_logit_softcapping.has_value());
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.hidden_act, "gelu_pytorch_tanh");
  const auto refused = [&](const std::string& extra, const std::string& expected) {
    try {
      parse_model_config(gemma + extra + "}", "c");
      ADD_FAILURE() << extra << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
    }
  };
  refused(R"(,"attn_logit_softcapping":50.0)", "attn_logit_softcapping is not supported");
  refused(R"(,"final_logit_softcapping":0)", "final_logit_softcapping must be positive");
  refused(R"(,"sliding_window_pattern":0)", "sliding_window_pattern must be positive");
  refused(R"(,"rope_parameters":{"full_attention":{"rope_type":"yarn"}})", "rope_type 'yarn' is not supported");
  refused(R"(,"rope_parameters":{"chunked_attention":{}})", "chunked_attention");
  refused(R"(,"use_bidirectional_attention":true)", "use_bidirectional_attention");
  refused(R"(,"query_pre_attn_scalar":-1)", "query_pre_attn_scalar must be positive");
}

TEST(ModelConfig, HeadDimDefaultsDependOnTheClass) {
  EXPECT_EQ(parse_model_config(with(""), "c").head_dim, 16);  // Llama: hidden / heads
  std::string qwen3 = with("");
  qwen3.replace(qwen3.find("\"llama\""), 7, "\"qwen3\"");
  EXPECT_EQ(parse_model_config(qwen3, "c").head_dim, 128);
  EXPECT_EQ(parse_model_config(with(R"(,"head_dim":8)"), "c").head_dim, 8);
}

TEST(ModelConfig, Defaults) {
  ModelConfig config = parse_model_config(with(""), "c");
  EXPECT_EQ(config.num_key_value_heads, 4);
  EXPECT_DOUBLE_EQ(config.rope.theta, 10000.0);
  EXPECT_FALSE(config.tie_word_embeddings);
  EXPECT_TRUE(config.eos_token_id.empty());
  EXPECT_EQ(parse_model_config(with(R"(,"eos_token_id":[2,7])"), "c").eos_token_id, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(parse_model_config(with(R"(,"eos_token_id":5)"), "c").eos_token_id, (std::vector<int64_t>{5}));
  EXPECT_EQ(parse_model_config(with(R"(,"dtype":"bfloat16")"), "c").torch_dtype, DType::bf16);
  EXPECT_DOUBLE_EQ(parse_model_config(with(R"(,"rope_scaling":{"rope_theta":5.0})"), "c").rope.theta, 5.0);
}

TEST(ModelConfig, MissingKeys) {
  expect_config_error(R"({"architectures":["LlamaForCausalLM"]})", {"vocab_size", "missing"});
  expect_config_error(R"({"vocab_size":3})", {"architectures"});
  std::string no_layers = with("");
  no_layers.replace(no_layers.find("\"num_hidden_layers\":2,"), 22, "");
  expect_config_error(no_layers, {"num_hidden_layers", "missing"});
}

TEST(ModelConfig, IllTypedKeys) {
  expect_config_error(with(R"(,"rms_norm_eps":"small")"), {"rms_norm_eps", "number"});
  expect_config_error(with(R"(,"num_key_value_heads":2.5)"), {"num_key_value_heads", "integer"});
  expect_config_error(with(R"(,"tie_word_embeddings":"yes")"), {"tie_word_embeddings", "true or false"});
  expect_config_error(with(R"(,"eos_token_id":["x"])"), {"eos_token_id", "integer"});
  expect_config_error(with(R"(,"torch_dtype":"float7")"), {"torch_dtype", "float7"});
  expect_config_error(R"({"architectures":"LlamaForCausalLM"})", {"architectures"});
  expect_config_error("{not json", {"not valid JSON"});
  expect_config_error("[]", {"JSON object"});
}

TEST(ModelConfig, InconsistentValues) {
  expect_config_error(with(R"(,"num_key_value_heads":3)"), {"num_key_value_heads", "multiple"});
  expect_config_error(with(R"(,"head_dim":7)"), {"head_dim", "even"});
  expect_config_error(with(R"(,"rope_scaling":{"rope_type":"yarn","factor":2})"), {"rope_type", "yarn", "llama3"});
  std::string negative = with("");
  negative.replace(negative.find("\"vocab_size\":32"), 15, "\"vocab_size\":-1");
  expect_config_error(negative, {"vocab_size", "positive"});
}

TEST(GenerationConfigFile, ReadsWhatIsSetAndLeavesTheRestUnset) {
  ModelFiles files = ModelFiles::directory(testing::data_path("fixtures/glm4-tiny"));
  ModelConfig model = load_model_config(files);
  GenerationConfig config = load_generation_config(files, model);
  ASSERT_TRUE(config.eos_token_id.has_value());
  EXPECT_EQ(config.eos_token_id->size(), 2u);
  EXPECT_FALSE(config.temperature.has_value());

  ModelFiles stories = ModelFiles::directory(std::string(SHARDLM_DATA_DIR) + "/models/stories260K");
  GenerationConfig stories_config = load_generation_config(stories, load_model_config(stories));
  EXPECT_EQ(stories_config.max_length, 512);
  EXPECT_EQ(stories_config.eos_token_id, (std::vector<int64_t>{2}));
}

}  // namespace
}  // namespace shardlm::io

namespace shardlm::io {
namespace {

std::string qwen2_config(const std::string& extra) {
  return R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","vocab_size":32,"hidden_size":64,
    "intermediate_size":100,"num_hidden_layers":4,"num_attention_heads":4)" + extra + "}";
}

TEST(ModelConfig, SlidingWindowLayersFollowTheQwenRule) {
  ModelConfig off = parse_model_config(qwen2_config(R"(,"sliding_window":8,"max_window_layers":2)"), "c");
  EXPECT_EQ(off.sliding_window, 0);  // use_sliding_window is false
  EXPECT_EQ(off.attention_window(3), 0);
  ModelConfig on = parse_model_config(
      qwen2_config(R"(,"use_sliding_window":true,"sliding_window":8,"max_window_layers":2)"), "c");
  EXPECT_EQ(on.layer_types, (std::vector<std::string>{"full_attention", "full_attention", "sliding_attention",
                                                      "sliding_attention"}));
  EXPECT_EQ(on.attention_window(1), 0);
  EXPECT_EQ(on.attention_window(2), 8);
  ModelConfig listed = parse_model_config(
      qwen2_config(R"(,"use_sliding_window":true,"sliding_window":8,
        "layer_types":["sliding_attention","full_attention","full_attention","full_attention"])"), "c");
  EXPECT_EQ(listed.attention_window(0), 8);
  EXPECT_EQ(listed.attention_window(1), 0);
}

TEST(ModelConfig, BadLayerTypes) {
  expect_config_error(qwen2_config(R"(,"layer_types":["full_attention"])"), {"layer_types", "one entry per layer"});
  expect_config_error(qwen2_config(R"(,"layer_types":["full_attention","x","full_attention","full_attention"])"),
                      {"layer_types", "\"x\""});
  expect_config_error(
      qwen2_config(R"(,"layer_types":["sliding_attention","full_attention","full_attention","full_attention"])"),
      {"sliding_window"});
  expect_config_error(qwen2_config(R"(,"use_sliding_window":true,"sliding_window":0)"), {"sliding_window"});
}

}  // namespace
}  // namespace shardlm::io
