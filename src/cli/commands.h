#pragma once
#include <CLI/CLI.hpp>

namespace shardlm::cli {

// Each adds its subcommand to `app`; the callback runs it.
void add_generate_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_download_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_random_model_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
// In a process `shardlm launch` started: CUDA_VISIBLE_DEVICES becomes the one GPU of this
// process's local rank. Must run before anything touches CUDA.
void show_each_rank_its_gpu();

// The whole `shardlm` command tree: its description, --version and every subcommand.
void add_commands(CLI::App& app);

}  // namespace shardlm::cli
