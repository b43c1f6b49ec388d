// `shardlm compile`: every executable a generation configuration needs, compiled ahead
// of time into the pjrt/tpu compile cache, so that serving or a batch job starts without
// compiling.
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/model_options.h"

namespace shardlm::cli {
namespace {

struct CompileArguments {
  ModelArguments model;
  SamplingArguments sampling;
  std::vector<int64_t> batch_sizes{1};
};

void run(CompileArguments& args) {
  const bool pjrt_device = args.model.device.starts_with("tpu") || args.model.device.starts_with("pjrt");
  if (!args.model.topology.empty() && !pjrt_device)
    fail("--topology describes PJRT devices (libtpu: v5e:2x2) to compile for: use it with --device tpu, not --device ",
         args.model.device);
  LoadedModel loaded = load_model(args.model);
  AutoModelForCausalLM& model = loaded.model;
  if (!detail::Access::impl(model).backend->compiles_graphs())
    fail("shardlm compile keeps whole-graph programs in the pjrt/tpu compile cache; --device ", args.model.device,
         " compiles its executables at start-up in milliseconds and keeps none: use --device pjrt or tpu");
  const GenerationConfig config = to_generation_config(args.sampling);
  for (const int64_t batch : args.batch_sizes) {
    const AutoModelForCausalLM::Stats before = model.last_stats();
    const auto start = std::chrono::steady_clock::now();
    model.compile_ahead({batch}, config);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const AutoModelForCausalLM::Stats after = model.last_stats();
    std::printf("batch %lld: prefill chunk and decode step over a %lld-position cache%s: %lld compiled, %lld %s the "
                "compile cache (%.2f s)\n",
                static_cast<long long>(batch), static_cast<long long>(detail::Access::impl(model).generator->max_cache_len()),
                args.model.topology.empty() ? "" : (" for topology " + args.model.topology).c_str(),
                static_cast<long long>(after.programs_compiled - before.programs_compiled),
                static_cast<long long>(after.programs_loaded - before.programs_loaded),
                args.model.topology.empty() ? "loaded from" : "already in", seconds);
    std::fflush(stdout);
  }
}

}  // namespace

void add_compile_command(CLI::App& app) {
  auto args = std::make_shared<CompileArguments>();
  CLI::App* command = app.add_subcommand(
      "compile",
      "Compile ahead of time, into the pjrt/tpu compile cache (--compile-cache), every program that `shardlm "
      "generate` with the same options needs for each --batch-sizes entry: its prefill chunk and decode step. A "
      "later run with the same model, options and plugin then compiles nothing (--stats shows it).");
  add_model_options(*command, args->model);
  add_sampling_options(*command, args->sampling);
  command->add_option("--batch-sizes,-b", args->batch_sizes, "Batch sizes (prompts per generate call) to compile for")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--topology", args->model.topology,
                      "Compile for devices this machine does not have, e.g. v5e:2x2 or v4:2x2x1 with --device tpu "
                      "(libtpu, no TPU needed): the programs go into --compile-cache, to be copied to the TPU "
                      "machine; the plugin must support PJRT_Compile");
  command->callback([args] { run(*args); });
}

}  // namespace shardlm::cli
