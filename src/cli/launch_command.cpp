// `shardlm launch`: starts one process per device through Open MPI's mpirun, so that
// `shardlm launch --nproc-per-node 4 -- shardlm generate --tp-size 4 ...` is all a user types.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "core/error.h"

namespace shardlm::cli {
namespace {

constexpr const char* one_gpu_per_rank_variable = "SHARDLM_ONE_GPU_PER_RANK";

struct LaunchArguments {
  int nproc_per_node = 1;
  std::vector<std::string> hosts;
  std::string mpirun = "mpirun";
  bool oversubscribe = false, dry_run = false;
  std::vector<std::string> command;
};

std::string this_executable() {
  char path[4096];
  const ssize_t length = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return length > 0 ? std::string(path, static_cast<size_t>(length)) : std::string("shardlm");
}

std::vector<std::string> mpirun_command(const LaunchArguments& args) {
  const int hosts = args.hosts.empty() ? 1 : static_cast<int>(args.hosts.size());
  std::vector<std::string> command{args.mpirun, "-np", std::to_string(args.nproc_per_node * hosts)};
  if (!args.hosts.empty()) {
    std::string host_list;
    for (const std::string& host : args.hosts)
      host_list += (host_list.empty() ? "" : ",") + host + ":" + std::to_string(args.nproc_per_node);
    command.insert(command.end(), {"--host", host_list});
  } else if (args.oversubscribe || args.nproc_per_node > static_cast<int>(std::thread::hardware_concurrency())) {
    // More ranks than cores: Open MPI refuses without it (a test of 4 ranks on 2 cores).
    command.push_back("--oversubscribe");
  }
  if (args.oversubscribe && !args.hosts.empty()) command.push_back("--oversubscribe");
  // Open MPI refuses to run as root unless told; containers and CI run as root.
  if (::geteuid() == 0) command.push_back("--allow-run-as-root");
  // Each rank runs a thread pool of its share of the cores; binding a rank to one core
  // would squeeze that pool onto it.
  command.insert(command.end(), {"--bind-to", "none"});
  // Each rank then narrows CUDA_VISIBLE_DEVICES to the GPU of its local rank
  // (show_each_rank_its_gpu), so that every process sees its device as cuda:0.
  command.insert(command.end(), {"-x", std::string(one_gpu_per_rank_variable) + "=1"});
  for (size_t i = 0; i < args.command.size(); ++i)
    command.push_back(i == 0 && args.command[0] == "shardlm" ? this_executable() : args.command[i]);
  return command;
}

bool serves(const std::vector<std::string>& command) {
  return command.size() > 1 && command[1] == "serve" &&
         (command[0] == "shardlm" || command[0].ends_with("/shardlm"));
}

pid_t mpirun_pid = -1;

void forward_as_drain(int number) {
  // async-signal-safe; a hang-up leaves no one to drain for: the job ends
  if (mpirun_pid > 0) ::kill(mpirun_pid, number == SIGHUP ? SIGTERM : SIGUSR1);
}

// mpirun ends the whole job at SIGINT or SIGTERM, so a server would lose what runs.
// Instead, launch turns them into SIGUSR1, which mpirun passes to every rank untouched:
// rank 0 drains and then releases the others, and mpirun's status is the job's.
int run_server_job(std::vector<char*>& argv) {
  mpirun_pid = ::fork();
  SHARDLM_CHECK(mpirun_pid >= 0, "launch: cannot fork: ", std::strerror(errno));
  if (mpirun_pid == 0) {
    ::setpgid(0, 0);  // a terminal's Ctrl-C reaches launch alone, which passes it on as SIGUSR1
    ::execvp(argv[0], argv.data());
    std::cerr << "shardlm launch: cannot start '" << argv[0] << "': " << std::strerror(errno)
              << ". Install Open MPI (apt-get install openmpi-bin) or pass --mpirun PATH\n";
    ::_exit(127);
  }
  struct sigaction action{};
  action.sa_handler = forward_as_drain;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
  int status = 0;
  while (::waitpid(mpirun_pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void run_launch(const LaunchArguments& args) {
  if (args.command.empty())
    fail("launch needs the command to start after `--`, e.g. shardlm launch --nproc-per-node 2 -- shardlm generate "
         "--tp-size 2 --prompt Hello");
  const std::vector<std::string> command = mpirun_command(args);
  std::string line;
  for (const std::string& part : command) line += (line.empty() ? "" : " ") + part;
  if (args.dry_run) {
    std::cout << line << "\n";
    return;
  }
  std::cerr << "shardlm launch: " << line << "\n";
  // Inside containers, Open MPI's cross-memory-attach copies between ranks are often
  // forbidden (ptrace rules) and fail at run time; our messages are small, so the plain
  // shared-memory path costs nothing. A value the user set wins.
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", /*overwrite=*/0);
  std::vector<char*> argv;
  for (const std::string& part : command) argv.push_back(const_cast<char*>(part.c_str()));
  argv.push_back(nullptr);
  if (serves(args.command)) std::exit(run_server_job(argv));
  ::execvp(argv[0], argv.data());
  fail("cannot start '", args.mpirun, "': ", std::strerror(errno),
       ". Install Open MPI (apt-get install openmpi-bin) or pass --mpirun PATH");
}

}  // namespace

void show_each_rank_its_gpu() {
  const char* requested = std::getenv(one_gpu_per_rank_variable);
  const char* local_rank_text = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!requested || std::string(requested) != "1" || !local_rank_text) return;
  const int local_rank = std::atoi(local_rank_text);
  std::vector<std::string> devices;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string list = visible;
    for (size_t begin = 0; begin <= list.size();) {
      const size_t end = std::min(list.find(',', begin), list.size());
      if (end > begin) devices.push_back(list.substr(begin, end - begin));
      begin = end + 1;
    }
  }
  // Unset: the host's GPUs in order. More ranks than listed GPUs: left alone, so the
  // backend's error names the device count.
  if (devices.empty()) devices.push_back(std::to_string(local_rank));
  else if (local_rank < static_cast<int>(devices.size())) devices = {devices[local_rank]};
  else return;
  ::setenv("CUDA_VISIBLE_DEVICES", devices.front().c_str(), 1);
}

void add_launch_command(CLI::App& app) {
  auto args = std::make_shared<LaunchArguments>();
  CLI::App* command = app.add_subcommand(
      "launch",
      "Start a tensor-parallel job: one process per device through Open MPI's mpirun. Each process sees its rank "
      "and local rank (its device) from mpirun; give the command the same --tp-size.\n"
      "  shardlm launch --nproc-per-node 2 -- shardlm generate --tp-size 2 --prompt \"Once upon a time\"\n"
      "A plain `mpirun -np 2 shardlm generate --tp-size 2 ...` works too.\n"
      "For `serve`, SIGINT and SIGTERM reach the ranks as SIGUSR1: the server finishes what runs, then exits.");
  command->add_option("--nproc-per-node", args->nproc_per_node, "Processes on each host (one per device)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--hosts", args->hosts, "Hosts to run on, comma-separated (default: this one)")->delimiter(',');
  command->add_option("--mpirun", args->mpirun, "The mpirun to use")->capture_default_str();
  command->add_flag("--oversubscribe", args->oversubscribe,
                    "Allow more processes than cores (automatic on this host when needed)");
  command->add_flag("--dry-run", args->dry_run, "Print the mpirun command instead of running it");
  command->add_option("command", args->command, "The command each process runs (after --)");
  command->callback([args] { run_launch(*args); });
}

}  // namespace shardlm::cli
