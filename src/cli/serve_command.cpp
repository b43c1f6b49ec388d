// `shardlm serve`: the OpenAI API (completions, chat completions, models, health,
// metrics) over HTTP, with continuous batching (server/http_server.h).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "server/http_server.h"

namespace shardlm::cli {
namespace {

struct ServeArguments {
  ModelArguments model;
  server::ServeOptions serve;
  double shutdown_grace_s = 30;
};

void run_serve(ServeArguments& args) {
  LoadedModel loaded = load_model(args.model);
  if (args.serve.served_model_name.empty()) args.serve.served_model_name = args.model.model;
  args.serve.shutdown_grace = std::chrono::milliseconds(static_cast<int64_t>(args.shutdown_grace_s * 1000));
  server::serve(loaded.model, loaded.tokenizer ? &*loaded.tokenizer : nullptr, args.serve, [](int port) {
    // A line a script can wait for (stdout, flushed), beside the log line on stderr.
    std::printf("listening on port %d\n", port);
    std::fflush(stdout);
  });
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArguments>();
  CLI::App* command = app.add_subcommand(
      "serve",
      "Serve the model over the OpenAI API: POST /v1/completions, POST /v1/chat/completions,\n"
      "GET /v1/models, GET /health, GET /metrics (Prometheus). Requests share the model through\n"
      "continuous batching over a fixed number of sequence slots; every step shape is compiled\n"
      "before the port opens. SIGINT/SIGTERM: stop taking requests, finish what runs, exit.\n"
      "Tensor parallel: shardlm launch --nproc-per-node 2 -- shardlm serve --tp-size 2 --model DIR\n"
      "(rank 0 serves and plans every step; the other ranks follow).");
  add_model_options(*command, args->model);
  server::ServeOptions& o = args->serve;
  command->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  command->add_option("--port", o.port, "Port to listen on (0: any free port, printed)")->capture_default_str();
  command->add_option("--served-model-name", o.served_model_name,
                      "The model name requests use and /v1/models lists (default: --model)");
  command->add_option("--max-num-seqs", o.max_num_seqs,
                      "Sequences served at once (KV cache slots); default: what half the free memory holds, at most 16")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  command->add_option("--max-model-len", o.max_model_len,
                      "Prompt plus generated tokens per sequence (default: min(max_position_embeddings, 4096))")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  command->add_option("--max-waiting", o.max_waiting,
                      "Sequences queued beyond the slots; more get 503 with Retry-After")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  command->add_option("--max-num-batched-tokens", o.max_num_batched_tokens,
                      "Tokens one step feeds: each decoding sequence 1, each prefill chunk its size "
                      "(default: slots + 4 chunks)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command->add_option("--prefill-chunk-size", o.prefill_chunk_size, "Prompt tokens per prefill row")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  command->add_flag("!--no-enable-prefix-caching", o.prefix_caching,
                    "Prefill every prompt in full, even when a free slot holds its prefix");
  command->add_option("--max-body-bytes", o.max_body_bytes, "Larger request bodies get 413")->capture_default_str();
  command->add_option("--shutdown-grace", args->shutdown_grace_s,
                      "Seconds running requests get to finish after SIGINT/SIGTERM before they are cancelled")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  command->callback([args] { run_serve(*args); });
}

}  // namespace shardlm::cli
