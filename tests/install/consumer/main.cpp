// What a user's program does with an installed shardlm: loads a model and its tokenizer,
// generates greedily, and catches shardlm::Error thrown from inside the library.
//   consumer [model] [prompt]  -> the generated ids, comma-separated
#include <shardlm/shardlm.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  const std::string model_path = argc > 1 ? argv[1] : "embedded:stories260K";
  const std::string prompt = argc > 2 ? argv[2] : "Once upon a time";
  try {
    const shardlm::AutoTokenizer tokenizer = shardlm::AutoTokenizer::from_pretrained(model_path);
    shardlm::AutoModelForCausalLM model = shardlm::AutoModelForCausalLM::from_pretrained(model_path);
    const shardlm::BatchEncoding inputs = tokenizer(prompt);
    const auto rows = model.generate(inputs, {.do_sample = false, .max_new_tokens = 20});
    const size_t prompt_length = inputs.input_ids[0].size();
    for (size_t i = prompt_length; i < rows[0].size(); ++i)
      std::printf("%s%lld", i == prompt_length ? "" : ",", static_cast<long long>(rows[0][i]));
    std::printf("\n");
    return 0;
  } catch (const shardlm::Error& error) {
    std::fprintf(stderr, "shardlm::Error: %s\n", error.what());
    return 2;
  }
}
