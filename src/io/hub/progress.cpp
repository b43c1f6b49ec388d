#include "io/hub/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "core/error.h"

namespace shardlm::io::hub {
namespace {

constexpr auto bar_redraw_interval = std::chrono::milliseconds(100);
constexpr auto line_interval = std::chrono::seconds(10);
constexpr size_t name_width = 22;
constexpr size_t bar_width = 12;

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string rate_text(uint64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  return format_bytes(static_cast<uint64_t>(static_cast<double>(bytes) / seconds)) + "/s";
}

std::string eta_text(uint64_t remaining, uint64_t bytes, double seconds) {
  if (remaining == 0) return format_duration(0);
  if (bytes == 0 || seconds <= 0) return "?";
  return format_duration(static_cast<double>(remaining) * seconds / static_cast<double>(bytes));
}

int percent(uint64_t done, uint64_t size) { return size == 0 ? 100 : static_cast<int>(done * 100 / size); }

std::string bar(uint64_t done, uint64_t size) {
  size_t filled = size == 0 ? bar_width : static_cast<size_t>(done * bar_width / size);
  return "[" + std::string(std::min(filled, bar_width), '#') + std::string(bar_width - std::min(filled, bar_width), '.') +
         "]";
}

std::string padded_name(const std::string& name) {
  if (name.size() > name_width) return "..." + name.substr(name.size() - (name_width - 3));
  return name + std::string(name_width - name.size(), ' ');
}

bool is_terminal(std::FILE* out) {
  const char* term = std::getenv("TERM");
  return ::isatty(::fileno(out)) == 1 && !(term != nullptr && std::string_view(term) == "dumb");
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + " B";
  static const char* const units[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  for (value /= 1000; value >= 999.5 && unit + 1 < std::size(units); value /= 1000) ++unit;
  return fixed(value, value < 9.995 ? 2 : value < 99.95 ? 1 : 0) + " " + units[unit];
}

std::string format_duration(double seconds) {
  long total = std::lround(std::max(0.0, seconds));
  long hours = total / 3600, minutes = total / 60 % 60, rest = total % 60;
  char text[48];
  if (hours > 0) std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", hours, minutes, rest);
  else std::snprintf(text, sizeof text, "%ld:%02ld", minutes, rest);
  return text;
}

DownloadProgress::DownloadProgress(ProgressMode mode, uint64_t total_bytes, size_t file_count, std::FILE* out)
    : mode_(mode), out_(out), total_bytes_(total_bytes), file_count_(file_count), started_(Clock::now()) {
  if (mode_ == ProgressMode::automatic) mode_ = is_terminal(out_) ? ProgressMode::bars : ProgressMode::lines;
}

DownloadProgress::~DownloadProgress() {
  std::lock_guard lock(mutex_);
  if (mode_ == ProgressMode::quiet || files_.empty()) return;
  const Clock::time_point now = Clock::now();
  if (mode_ == ProgressMode::bars) {
    if (drawn_lines_ > 0) std::fprintf(out_, "\x1b[%zuA\r\x1b[J", drawn_lines_);
    drawn_lines_ = 0;
    print_line(total_status(now));
  } else if (file_count_ > 1) {
    print_line(str_cat("[shardlm] downloaded ", finished_count_, " of ", file_count_, " files (",
                       format_bytes(transferred_), " in ", format_duration(seconds_between(started_, now)), ")"));
  }
}

void DownloadProgress::start(const std::string& filename, uint64_t size, uint64_t resumed_from) {
  std::lock_guard lock(mutex_);
  FileState& file = files_[filename];
  file.size = size;
  file.done = file.resumed_from = resumed_from;
  file.started = file.last_line = Clock::now();
  resumed_bytes_ += resumed_from;
  if (mode_ == ProgressMode::lines) {
    std::string resumed = resumed_from > 0 ? ", resuming at " + format_bytes(resumed_from) : "";
    print_line("[shardlm] downloading " + filename + " (" + format_bytes(size) + resumed + ")");
  }
  draw_bars(true);
}

void DownloadProgress::advance(const std::string& filename, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  FileState& file = files_[filename];
  file.done += bytes;
  transferred_ += bytes;
  const Clock::time_point now = Clock::now();
  if (mode_ == ProgressMode::lines && now - file.last_line >= line_interval) {
    file.last_line = now;
    print_line("[shardlm] " + file_status(filename, file, now));
  }
  draw_bars(false);
}

void DownloadProgress::restart(const std::string& filename) {
  std::lock_guard lock(mutex_);
  FileState& file = files_[filename];
  transferred_ -= file.done - file.resumed_from;
  resumed_bytes_ -= file.resumed_from;
  file.done = file.resumed_from = 0;
  file.started = Clock::now();
  if (mode_ == ProgressMode::lines) print_line("[shardlm] " + filename + ": the server cannot resume; starting over");
  draw_bars(true);
}

void DownloadProgress::finish(const std::string& filename) {
  std::lock_guard lock(mutex_);
  FileState& file = files_[filename];
  file.finished = true;
  ++finished_count_;
  const Clock::time_point now = Clock::now();
  std::string summary = filename + " (" + format_bytes(file.size) + " in " +
                        format_duration(seconds_between(file.started, now)) + ")";
  if (mode_ == ProgressMode::lines) {
    print_line("[shardlm] downloaded " + summary);
  } else if (mode_ == ProgressMode::bars) {
    if (drawn_lines_ > 0) std::fprintf(out_, "\x1b[%zuA\r\x1b[J", drawn_lines_);
    drawn_lines_ = 0;
    print_line("downloaded " + summary);
    draw_bars(true);
  }
}

void DownloadProgress::found_complete(const std::string& filename, uint64_t size) {
  std::lock_guard lock(mutex_);
  FileState& file = files_[filename];
  file.size = file.done = file.resumed_from = size;
  file.finished = true;
  resumed_bytes_ += size;
  ++finished_count_;
  if (mode_ == ProgressMode::lines) print_line("[shardlm] " + filename + " was downloaded by another process");
  draw_bars(true);
}

void DownloadProgress::draw_bars(bool force) {
  if (mode_ != ProgressMode::bars) return;
  const Clock::time_point now = Clock::now();
  if (!force && now - last_draw_ < bar_redraw_interval) return;
  last_draw_ = now;
  if (drawn_lines_ > 0) std::fprintf(out_, "\x1b[%zuA\r\x1b[J", drawn_lines_);
  drawn_lines_ = 0;
  for (const auto& [filename, file] : files_) {
    if (file.finished) continue;
    print_line(file_status(filename, file, now));
    ++drawn_lines_;
  }
  print_line(total_status(now));
  ++drawn_lines_;
}

void DownloadProgress::print_line(const std::string& text) {
  std::string line = text;
  // A wrapped line would break the cursor arithmetic of the redraw.
  if (mode_ == ProgressMode::bars) line = line.substr(0, std::max<size_t>(terminal_columns(), 2) - 1);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

std::string DownloadProgress::file_status(const std::string& filename, const FileState& file,
                                          Clock::time_point now) const {
  const double seconds = seconds_between(file.started, now);
  const uint64_t transferred = file.done - file.resumed_from;
  std::string head = mode_ == ProgressMode::bars ? padded_name(filename) + " " : filename + ": ";
  std::string progress = mode_ == ProgressMode::bars ? " " + bar(file.done, file.size) : "";
  return head + std::to_string(percent(file.done, file.size)) + "%" + progress + " " + format_bytes(file.done) + "/" +
         format_bytes(file.size) + " " + rate_text(transferred, seconds) + " ETA " +
         eta_text(file.size - std::min(file.size, file.done), transferred, seconds);
}

std::string DownloadProgress::total_status(Clock::time_point now) const {
  const double seconds = seconds_between(started_, now);
  const uint64_t done = resumed_bytes_ + transferred_;
  std::string label = "total (" + std::to_string(finished_count_) + "/" + std::to_string(file_count_) + " files)";
  return padded_name(label) + " " + std::to_string(percent(done, total_bytes_)) + "% " + bar(done, total_bytes_) +
         " " + format_bytes(done) + "/" + format_bytes(total_bytes_) + " " + rate_text(transferred_, seconds) +
         " ETA " + eta_text(total_bytes_ - std::min(total_bytes_, done), transferred_, seconds);
}

size_t DownloadProgress::terminal_columns() const {
  struct winsize size {};
  if (::ioctl(::fileno(out_), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace shardlm::io::hub
