// The `shardlm` command. Generated text goes to stdout; logs and errors to stderr.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"
#include "parallel/process_group.h"

int main(int argc, char** argv) {
  CLI::App app{
      "shardlm: run Hugging Face causal language models (Llama, Qwen2, Qwen3, GLM-4) natively.\n"
      "Without --model, commands use the built-in stories260K model."};
  app.set_version_flag("--version", "shardlm 0.1.0");
  app.require_subcommand(1);
  shardlm::cli::add_generate_command(app);
  shardlm::cli::add_devices_command(app);
  shardlm::cli::add_download_command(app);
  shardlm::cli::add_chat_command(app);
  shardlm::cli::add_tokenize_command(app);
  shardlm::cli::add_bench_command(app);
  shardlm::cli::add_quantize_command(app);
  shardlm::cli::add_random_model_command(app);
  shardlm::cli::add_launch_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const shardlm::JobError& error) {
    // Every rank of a tensor-parallel job raised this one together: each exits on its own.
    std::fflush(stdout);
    std::fprintf(stderr, "shardlm: error: %s\n", error.what());
    return 1;
  } catch (const shardlm::Error& error) {
    std::fflush(stdout);
    std::fprintf(stderr, "shardlm: error: %s\n", error.what());
    // The other ranks may be waiting for this one in a collective: end them too.
    shardlm::parallel::abort_job_if_distributed(error.what());
    return 1;
  } catch (const std::exception& error) {
    std::fflush(stdout);
    std::fprintf(stderr, "shardlm: internal error: %s\n", error.what());
    shardlm::parallel::abort_job_if_distributed(error.what());
    return 3;
  }
  return 0;
}
