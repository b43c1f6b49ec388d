// The `shardlm` command. Generated text goes to stdout; logs and errors to stderr.
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "parallel/process_group.h"

int main(int argc, char** argv) {
  shardlm::cli::show_each_rank_its_gpu();
  CLI::App app;
  shardlm::cli::add_commands(app);
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
    // The other ranks may be waiting for this one in a collective: end them too, with a
    // message naming this rank and its host (not returning in a job of several ranks).
    shardlm::parallel::abort_job_if_distributed(error.what());
    std::fprintf(stderr, "shardlm: error: %s\n", error.what());
    return 1;
  } catch (const std::exception& error) {
    std::fflush(stdout);
    shardlm::parallel::abort_job_if_distributed(std::string("internal error: ") + error.what());
    std::fprintf(stderr, "shardlm: internal error: %s\n", error.what());
    return 3;
  }
  return 0;
}
