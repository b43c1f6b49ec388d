#include "server/http_server.h"

#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <thread>

#include "api/impl.h"
#include "core/error.h"
#include "core/logging.h"
#include "server/completion.h"
#include "server/serving_engine.h"

namespace shardlm::server {

namespace {

using nlohmann::json;

// Like llama.cpp's default context: positions a slot holds unless --max-model-len says.
constexpr int64_t default_max_model_len = 4096;
constexpr int64_t most_default_slots = 16;

// Slots whose KV cache takes at most half the host memory free now (each slot's pages
// cost memory only once written, so this is the worst case), at most 16.
int64_t default_slots(const models::CausalLM& model, int64_t max_model_len) {
  const io::ModelConfig& config = model.config();
  const auto per_slot = static_cast<double>(config.num_hidden_layers) * 2.0 * static_cast<double>(config.num_key_value_heads) *
                        static_cast<double>(max_model_len) * static_cast<double>(config.head_dim) *
                        static_cast<double>(dtype_size(model.kv_cache_dtype())) / model.tp_size();
  const double available = static_cast<double>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  return std::clamp<int64_t>(static_cast<int64_t>(available * 0.5 / per_slot), 1, most_default_slots);
}

// 1, 2, 4, ... below `limit`, and `limit` itself.
std::vector<int64_t> powers_of_two_to(int64_t limit) {
  std::vector<int64_t> buckets;
  for (int64_t b = 1; b < limit; b *= 2) buckets.push_back(b);
  buckets.push_back(limit);
  return buckets;
}

// Prefill chunk lengths: the chunk, a quarter of it, a sixteenth, down to 16 tokens. A
// prompt's last piece (or a prompt that is short, or whose prefix a slot held) runs in the
// shortest that holds it rather than padded to a whole chunk.
std::vector<int64_t> chunk_lengths(int64_t chunk) {
  std::vector<int64_t> lengths;
  for (int64_t length = chunk / 16; length < chunk; length *= 4)
    if (length >= 16) lengths.push_back(length);
  lengths.push_back(chunk);
  return lengths;
}

int signal_pipe[2] = {-1, -1};

void on_signal(int number) {
  const char byte = static_cast<char>(number);
  [[maybe_unused]] const ssize_t written = write(signal_pipe[1], &byte, 1);  // async-signal-safe
}

void answer_error(httplib::Response& response, const ApiError& error, Metrics& metrics) {
  response.status = error.status;
  if (error.status == 503) response.set_header("Retry-After", "1");
  response.set_content(json_text(error_body(error)), "application/json");
  metrics.request_finished(error.status);
}

class Api {
 public:
  Api(ServingEngine& engine, Metrics& metrics, const ModelContext& model) : engine_(engine), metrics_(metrics), model_(model) {}

  void completions(const httplib::Request& request, httplib::Response& response, Endpoint endpoint) {
    std::shared_ptr<Completion> completion;
    std::shared_ptr<RequestStream> stream;
    try {
      completion = std::make_shared<Completion>(parse_request(request.body, endpoint), model_);
      stream = engine_.submit(completion->sequences());
    } catch (const ApiError& error) {
      answer_error(response, error, metrics_);
      return;
    } catch (const Error& error) {  // e.g. a prompt the tokenizer refuses
      answer_error(response, ApiError(400, error.what()), metrics_);
      return;
    }
    const bool streaming = completion->request().stream;
    if (streaming) response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        streaming ? "text/event-stream" : "application/json",
        [this, completion, stream, streaming](size_t, httplib::DataSink& sink) {
          return provide(*completion, stream, streaming, sink);
        },
        [this, stream](bool success) {
          if (!success) engine_.cancel(stream);  // the client went away
        });
  }

  void models(httplib::Response& response) const {
    const json model{{"id", model_.name}, {"object", "model"}, {"created", 0}, {"owned_by", "shardlm"},
                     {"max_model_len", model_.max_model_len}};
    response.set_content(json_text({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  }

 private:
  // One call of the response's content provider: waits briefly for tokens and writes what
  // is ready; false ends the response (the client is gone: its sequences are cancelled).
  bool provide(Completion& completion, const std::shared_ptr<RequestStream>& stream, bool streaming,
               httplib::DataSink& sink) {
    std::vector<ChoiceEvent> events;
    const bool more = stream->wait(events, std::chrono::milliseconds(100));
    if (!sink.is_writable()) {
      engine_.cancel(stream);
      return false;
    }
    std::string text;
    if (streaming) text = completion.stream_events(events);
    else completion.absorb(events);
    if (!more) {
      const std::string error = stream->error();
      if (!error.empty()) {
        // The status line is gone already: the error goes in the body (OpenAI's object).
        const std::string body = json_text(error_body(ApiError(500, error, {}, "server_error")));
        text += streaming ? "data: " + body + "\n\n" : body;
        metrics_.request_finished(500);
      } else {
        text += streaming ? completion.stream_end(*stream) : json_text(completion.response(*stream));
        metrics_.request_finished(200);
      }
    }
    if (!text.empty() && !sink.write(text.data(), text.size())) {
      engine_.cancel(stream);
      return false;
    }
    if (!more) sink.done();
    return true;
  }

  ServingEngine& engine_;
  Metrics& metrics_;
  const ModelContext& model_;
};

void add_routes(httplib::Server& http, Api& api, ServingEngine& engine, Metrics& metrics) {
  http.Post("/v1/completions", [&](const httplib::Request& q, httplib::Response& r) {
    api.completions(q, r, Endpoint::completions);
  });
  http.Post("/v1/chat/completions", [&](const httplib::Request& q, httplib::Response& r) {
    api.completions(q, r, Endpoint::chat_completions);
  });
  http.Get("/v1/models", [&](const httplib::Request&, httplib::Response& r) { api.models(r); });
  http.Get("/health", [&](const httplib::Request&, httplib::Response& r) {
    r.status = engine.healthy() ? 200 : 503;
    r.set_content(engine.healthy() ? "{}" : R"({"status": "the engine failed"})", "application/json");
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& r) {
    r.set_content(metrics.text(engine.gauges()), "text/plain; version=0.0.4");
  });
  // What no route answered (404, 405), bodies over the limit (413): OpenAI's error object.
  http.set_error_handler([&](const httplib::Request& q, httplib::Response& r) {
    if (!r.body.empty()) return;
    const std::string message = r.status == 404   ? str_cat("no route ", q.method, " ", q.path)
                                : r.status == 413 ? "the request body is larger than the server takes"
                                                  : str_cat("HTTP ", r.status);
    r.set_content(json_text(error_body(ApiError(r.status, message))), "application/json");
    metrics.request_finished(r.status);
  });
  http.set_exception_handler([&](const httplib::Request&, httplib::Response& r, std::exception_ptr) {
    answer_error(r, ApiError(500, "internal error", {}, "server_error"), metrics);
  });
}

// A rank above 0 of a tensor-parallel server runs the steps rank 0 plans until it stops.
// SIGINT (a terminal's) and SIGUSR1 (what `shardlm launch` passes to every rank) are rank
// 0's to act on: it drains and then releases the others. SIGTERM still ends a follower:
// mpirun sends it when it ends the job, and a follower left behind would wait forever.
void follow(const models::CausalLM& model, backends::Backend& backend) {
  signal(SIGINT, SIG_IGN);
  signal(SIGUSR1, SIG_IGN);
  log::info(str_cat("rank ", model.tp_rank(), " follows rank 0's step plan"));
  generation::StepRunner runner(model, backend);
  runner.follow();
  log::info(str_cat("rank ", model.tp_rank(), " released"));
}

}  // namespace

void serve(AutoModelForCausalLM& model, const AutoTokenizer* tokenizer, const ServeOptions& options,
           const std::function<void(int port)>& on_listening) {
  AutoModelForCausalLM::Impl& impl = detail::Access::impl(model);
  const io::ModelConfig& config = impl.config;
  if (impl.model->tp_rank() != 0) return follow(*impl.model, *impl.backend);
  const int64_t max_model_len =
      options.max_model_len ? options.max_model_len : std::min(config.max_position_embeddings, default_max_model_len);
  SHARDLM_CHECK(max_model_len > 0 && max_model_len <= config.max_position_embeddings, "--max-model-len ",
                max_model_len, " must be in [1, ", config.max_position_embeddings, "] (max_position_embeddings)");
  const int64_t slots = options.max_num_seqs ? options.max_num_seqs : default_slots(*impl.model, max_model_len);
  SHARDLM_CHECK(slots > 0, "--max-num-seqs must be positive, got ", slots);
  const int64_t chunk = options.prefill_chunk_size;
  SHARDLM_CHECK(chunk > 0, "--prefill-chunk-size must be positive, got ", chunk);
  const int64_t budget = options.max_num_batched_tokens ? options.max_num_batched_tokens : slots + 4 * chunk;
  SHARDLM_CHECK(budget >= chunk, "--max-num-batched-tokens (", budget, ") must hold one prefill chunk (", chunk, ")");

  generation::StepRunner runner(*impl.model, *impl.backend);
  runner.lead();
  runner.set_execution({.compile = true, .prefill_chunk_size = chunk});
  runner.prepare_cache(slots, max_model_len);
  const generation::EngineOptions engine_options{
      .decode_buckets = powers_of_two_to(slots),
      .prefill_buckets = powers_of_two_to(std::clamp<int64_t>(budget / chunk, 1, slots)),
      .prefill_chunk_buckets = chunk_lengths(chunk),
      .token_budget = budget,
      .any_candidate_count = false,
      .prefix_caching = options.prefix_caching};
  log::notice(str_cat("serving with ", slots, " sequence slots of ", max_model_len, " positions (KV cache ",
                    runner.cache_bytes() >> 20, " MiB), a token budget of ", budget, " a step, prefill chunks of ",
                    chunk));
  Metrics metrics;
  ServingEngine engine(runner, engine_options, static_cast<size_t>(options.max_waiting), metrics);
  const ModelContext context{
      .name = options.served_model_name,
      .tokenizer = tokenizer,
      .text_tokenizer = tokenizer ? &detail::Access::impl(*tokenizer).tokenizer() : nullptr,
      .defaults = model.generation_config(),
      .vocab_size = config.vocab_size,
      .max_model_len = max_model_len};

  httplib::Server http;
  const auto threads = static_cast<size_t>(std::min<int64_t>(1024, 2 * (slots + options.max_waiting) + 8));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(options.max_body_bytes);
  http.set_keep_alive_timeout(2);
  Api api(engine, metrics, context);
  add_routes(http, api, engine, metrics);
  const int port = options.port == 0 ? http.bind_to_any_port(options.host) : options.port;
  if ((options.port == 0 && port < 0) || (options.port != 0 && !http.bind_to_port(options.host, port)))
    fail("cannot listen on ", options.host, ":", options.port,
         ": the address is in use or not this machine's (choose another with --host / --port)");

  // SIGINT and SIGTERM (to whichever thread: the backend's threads exist already) write to
  // a pipe that one thread waits on, which shuts down; the listener's end writes 0.
  SHARDLM_CHECK(pipe(signal_pipe) == 0, "serve: cannot make a pipe for signals");
  struct sigaction action{};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);  // what `shardlm launch` passes on for them
  std::atomic<bool> stopping{false};
  std::thread waiter([&] {
    char received = 0;
    while (read(signal_pipe[0], &received, 1) < 0 && errno == EINTR) {
    }
    if (received != 0) log::notice(str_cat("signal ", int{received}, ": finishing what runs, taking no new requests"));
    stopping = true;
    const int64_t cancelled = engine.drain(options.shutdown_grace);
    if (cancelled > 0) log::warning(str_cat("cancelled ", cancelled, " sequences still running after the grace period"));
    http.stop();
  });
  log::notice(str_cat("serving ", options.served_model_name, " on http://", options.host, ":", port));
  if (on_listening) on_listening(port);
  http.listen_after_bind();
  if (!stopping) {
    const char end = 0;
    [[maybe_unused]] const ssize_t written = write(signal_pipe[1], &end, 1);
  }
  waiter.join();
  runner.release_followers();
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  close(signal_pipe[0]);
  close(signal_pipe[1]);
  log::notice("server stopped");
}

}  // namespace shardlm::server
