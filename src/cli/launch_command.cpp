// `shardlm launch`: starts one process per device through Open MPI's mpirun, so that
// `shardlm launch --nproc-per-node 4 -- shardlm generate --tp-size 4 ...` is all a user types.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "core/error.h"

namespace shardlm::cli {
namespace {

constexpr const char* one_gpu_per_rank_variable = "SHARDLM_ONE_GPU_PER_RANK";

struct LaunchArguments {
  int nproc_per_node = 1;
  std::vector<std::string> hosts;
  std::string hostfile;
  std::vector<std::string> network_interfaces;
  std::vector<std::string> mca;  // KEY=VALUE
  std::string mpirun = "mpirun";
  bool oversubscribe = false, dry_run = false;
  std::vector<std::string> command;
};

std::string this_executable() {
  char path[4096];
  const ssize_t length = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return length > 0 ? std::string(path, static_cast<size_t>(length)) : std::string("shardlm");
}

// Open MPI's hostfile, one host a line ("node1 slots=4", # comments): the host names in order.
std::vector<std::string> read_hostfile(const std::string& path) {
  std::ifstream file(path);
  if (!file) fail("--hostfile ", path, ": cannot read it (", std::strerror(errno), ")");
  std::vector<std::string> hosts;
  for (std::string line; std::getline(file, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    if (std::string host; words >> host) hosts.push_back(host);
  }
  if (hosts.empty()) fail("--hostfile ", path, " names no host: write one host name a line");
  return hosts;
}

// A lost host is silent over TCP unless the daemons probe each other: with these, mpirun
// and each remote daemon notice within about 11 s and end the job (Open MPI's default
// is 5 minutes of silence, then 9 probes 20 s apart).
const std::vector<std::pair<std::string, std::string>> multi_host_keepalive = {
    {"oob_tcp_keepalive_time", "5"}, {"oob_tcp_keepalive_intvl", "2"}, {"oob_tcp_keepalive_probes", "3"}};

std::vector<std::pair<std::string, std::string>> mca_parameters(const LaunchArguments& args) {
  std::vector<std::pair<std::string, std::string>> parameters;
  for (const std::string& setting : args.mca) {
    const size_t equals = setting.find('=');
    if (equals == std::string::npos || equals == 0)
      fail("--mca '", setting, "' is not KEY=VALUE, e.g. --mca btl=tcp,self");
    parameters.emplace_back(setting.substr(0, equals), setting.substr(equals + 1));
  }
  if (!args.network_interfaces.empty()) {
    std::string list;
    for (const std::string& name : args.network_interfaces) list += (list.empty() ? "" : ",") + name;
    parameters.emplace_back("btl_tcp_if_include", list);
    parameters.emplace_back("oob_tcp_if_include", list);
  }
  if (!args.hosts.empty())
    for (const auto& setting : multi_host_keepalive) {
      const std::string& key = setting.first;
      const bool set = std::getenv(("OMPI_MCA_" + key).c_str()) ||
                       std::any_of(parameters.begin(), parameters.end(), [&](const auto& p) { return p.first == key; });
      if (!set) parameters.push_back(setting);
    }
  return parameters;
}

// Remote ranks see only the environment mpirun passes on: ours (SHARDLM_*, HF_*) goes too.
std::vector<std::string> forwarded_variables() {
  std::vector<std::string> names;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    if ((name.starts_with("SHARDLM_") || name.starts_with("HF_")) && name != one_gpu_per_rank_variable)
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> mpirun_command(const LaunchArguments& args) {
  const int hosts = args.hosts.empty() ? 1 : static_cast<int>(args.hosts.size());
  std::vector<std::string> command{args.mpirun, "-np", std::to_string(args.nproc_per_node * hosts)};
  if (!args.hosts.empty()) {
    // Ranks fill each host in turn: host i runs ranks i*n .. i*n+n-1.
    std::string host_list;
    for (const std::string& host : args.hosts)
      host_list += (host_list.empty() ? "" : ",") + host + ":" + std::to_string(args.nproc_per_node);
    command.insert(command.end(), {"--host", host_list, "--map-by", "slot"});
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
  for (const auto& [key, value] : mca_parameters(args)) command.insert(command.end(), {"--mca", key, value});
  // Each rank then narrows CUDA_VISIBLE_DEVICES to the GPU of its local rank
  // (show_each_rank_its_gpu), so that every process sees its device as cuda:0.
  command.insert(command.end(), {"-x", std::string(one_gpu_per_rank_variable) + "=1"});
  for (const std::string& name : forwarded_variables()) command.insert(command.end(), {"-x", name});
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

void forward_as_is(int number) {
  if (mpirun_pid > 0) ::kill(mpirun_pid, number);
}

// Reads mpirun's standard error as it comes, passing it on untouched, and remembers the
// host mpirun says it lost: Open MPI names that host's daemon, not the ranks it ran.
class ErrorWatcher {
 public:
  void feed(const char* bytes, size_t length) {
    line_.append(bytes, length);
    for (size_t end; (end = line_.find('\n')) != std::string::npos; line_.erase(0, end + 1)) {
      const std::string line = line_.substr(0, end);
      const size_t at = line.find("Remote daemon:");
      const size_t node = line.find(" on node ");
      if (at != std::string::npos && node != std::string::npos) lost_host_ = line.substr(node + 9);
    }
  }
  const std::string& lost_host() const { return lost_host_; }

 private:
  std::string line_, lost_host_;
};

// Passes mpirun's errors on until they end, or until shortly after mpirun has: a remote
// agent (ssh, or a daemon cut off from mpirun by a lost link) may hold the pipe open long
// after the job is over. Returns mpirun's wait status.
int pass_on_errors_until_exit(int from, ErrorWatcher& watcher) {
  using Clock = std::chrono::steady_clock;
  constexpr auto drain = std::chrono::seconds(2);
  std::optional<Clock::time_point> exited_at;
  int status = 0;
  char buffer[4096];
  for (bool open = true; open;) {
    if (!exited_at) {
      const pid_t done = ::waitpid(mpirun_pid, &status, WNOHANG);
      if (done == mpirun_pid) exited_at = Clock::now();
    }
    if (exited_at && Clock::now() - *exited_at > drain) break;
    pollfd readable{.fd = from, .events = POLLIN, .revents = 0};
    if (::poll(&readable, 1, 100) <= 0) continue;  // a timeout, or a signal: look at mpirun again
    const ssize_t got = ::read(from, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    open = got > 0;
    if (!open) break;
    for (ssize_t written = 0; written < got;) {
      const ssize_t put = ::write(STDERR_FILENO, buffer + written, static_cast<size_t>(got - written));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) break;
      written += put;
    }
    watcher.feed(buffer, static_cast<size_t>(got));
  }
  while (!exited_at && ::waitpid(mpirun_pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::string ranks_of_host(const LaunchArguments& args, const std::string& host) {
  const auto found = std::find(args.hosts.begin(), args.hosts.end(), host);
  if (found == args.hosts.end()) return "";
  const int first = static_cast<int>(found - args.hosts.begin()) * args.nproc_per_node;
  return args.nproc_per_node == 1 ? str_cat(" (rank ", first, ")")
                                   : str_cat(" (ranks ", first, " - ", first + args.nproc_per_node - 1, ")");
}

// mpirun ends the whole job at SIGINT or SIGTERM, so a server would lose what runs.
// Instead, for `serve` launch turns them into SIGUSR1, which mpirun passes to every rank
// untouched: rank 0 drains and then releases the others, and mpirun's status is the
// job's. Across hosts launch also reads mpirun's errors to name the ranks of a lost host.
int run_job(std::vector<char*>& argv, const LaunchArguments& args) {
  int errors[2] = {-1, -1};
  const bool watch = !args.hosts.empty();
  SHARDLM_CHECK(!watch || ::pipe(errors) == 0, "launch: cannot make a pipe: ", std::strerror(errno));
  const auto start = std::chrono::steady_clock::now();
  mpirun_pid = ::fork();
  SHARDLM_CHECK(mpirun_pid >= 0, "launch: cannot fork: ", std::strerror(errno));
  if (mpirun_pid == 0) {
    ::setpgid(0, 0);  // a terminal's Ctrl-C reaches launch alone, which passes it on
    if (watch) {
      ::dup2(errors[1], STDERR_FILENO);
      ::close(errors[0]), ::close(errors[1]);
    }
    ::execvp(argv[0], argv.data());
    std::cerr << "shardlm launch: cannot start '" << argv[0] << "': " << std::strerror(errno)
              << ". Install Open MPI (apt-get install openmpi-bin) or pass --mpirun PATH\n";
    ::_exit(127);
  }
  struct sigaction action{};
  action.sa_handler = serves(args.command) ? forward_as_drain : forward_as_is;
  sigemptyset(&action.sa_mask);
  for (int number : {SIGINT, SIGTERM, SIGHUP}) sigaction(number, &action, nullptr);
  ErrorWatcher watcher;
  int status = 0;
  if (watch) {
    ::close(errors[1]);
    status = pass_on_errors_until_exit(errors[0], watcher);
    ::close(errors[0]);
  } else {
    while (::waitpid(mpirun_pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code != 0 && !watcher.lost_host().empty()) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << "shardlm launch: lost contact with host " << watcher.lost_host()
              << ranks_of_host(args, watcher.lost_host())
              << ": it stopped answering or the network to it is down. The job ended after "
              << static_cast<int>(seconds) << " s (docs/TENSOR_PARALLEL.md, Failures)\n";
  }
  return code;
}

void run_launch(LaunchArguments args) {
  if (args.command.empty())
    fail("launch needs the command to start after `--`, e.g. shardlm launch --nproc-per-node 2 -- shardlm generate "
         "--tp-size 2 --prompt Hello");
  if (!args.hostfile.empty()) {
    if (!args.hosts.empty()) fail("give the hosts either with --hosts or with --hostfile, not both");
    args.hosts = read_hostfile(args.hostfile);
  }
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
  if (serves(args.command) || !args.hosts.empty()) std::exit(run_job(argv, args));
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
      "For `serve`, SIGINT and SIGTERM reach the ranks as SIGUSR1: the server finishes what runs, then exits.\n"
      "Across hosts, each rank gets this environment's SHARDLM_* and HF_* variables; a host that stops answering "
      "ends the job within about 11 s, naming it and its ranks.");
  command->add_option("--nproc-per-node", args->nproc_per_node, "Processes on each host (one per device)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--hosts", args->hosts,
                      "Hosts to run on, comma-separated (default: this one); host i runs ranks i*N .. i*N+N-1 "
                      "for N = --nproc-per-node. mpirun starts them over ssh (docs/TENSOR_PARALLEL.md)")
      ->delimiter(',')
      ->allow_extra_args(false);
  command->add_option("--hostfile", args->hostfile,
                      "File of hosts, one a line (Open MPI's hostfile; slots= is ignored: --nproc-per-node sets "
                      "the ranks of each host)");
  command->add_option("--network-interface", args->network_interfaces,
                      "Network interfaces the ranks and daemons talk over, comma-separated (e.g. eth1); default: "
                      "every one Open MPI finds")
      ->delimiter(',')
      ->allow_extra_args(false);
  command->add_option("--mca", args->mca,
                      "An Open MPI parameter as KEY=VALUE, repeatable: e.g. --mca btl=tcp,self (TCP only, no shared "
                      "memory)")
      ->allow_extra_args(false);
  command->add_option("--mpirun", args->mpirun, "The mpirun to use")->capture_default_str();
  command->add_flag("--oversubscribe", args->oversubscribe,
                    "Allow more processes than cores (automatic on this host when needed)");
  command->add_flag("--dry-run", args->dry_run, "Print the mpirun command instead of running it");
  command->add_option("command", args->command, "The command each process runs (after --)");
  command->callback([args] { run_launch(*args); });
}

}  // namespace shardlm::cli
