// llama.cpp's greedy continuation of token ids, for make_fixture_ggufs.py --check (run by hand,
// never built by CMake):
//   g++ -O1 -std=c++17 llama_cpp_greedy.cpp -I$L/include -I$L/ggml/include -L$L/build/bin -lllama \
//     -Wl,-rpath,$L/build/bin -o llama_cpp_greedy     (L: a llama.cpp tree, built; docs/PERFORMANCE.md)
//   llama_cpp_greedy MODEL.gguf COUNT ID,ID,...
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "llama.h"
int main(int argc, char** argv) {
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  const int n = atoi(argv[2]);
  std::vector<llama_token> ids;
  for (char* p = strtok(argv[3], ","); p; p = strtok(nullptr, ",")) ids.push_back(atoi(p));
  // The whole prompt in one batch, and room for it and the continuation.
  const uint32_t needed = static_cast<uint32_t>(ids.size() + n);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = needed < 512 ? 512 : needed;
  cp.n_batch = cp.n_ubatch = cp.n_ctx;
  cp.n_threads = 2; cp.n_threads_batch = 2;
  llama_context* ctx = llama_init_from_model(model, cp);
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  llama_batch batch = llama_batch_get_one(ids.data(), (int)ids.size());
  std::string out;
  llama_token next;
  for (int i = 0; i < n; ++i) {
    if (llama_decode(ctx, batch)) return 2;
    const float* logits = llama_get_logits_ith(ctx, -1);
    next = 0;
    for (int v = 1; v < vocab; ++v) if (logits[v] > logits[next]) next = v;
    out += (i ? "," : "") + std::to_string(next);
    batch = llama_batch_get_one(&next, 1);
  }
  printf("%s\n", out.c_str());
}
