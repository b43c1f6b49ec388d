#pragma once
// Download progress: bars redrawn in place on a terminal (bytes, rate, ETA, per file
// and in total), a plain line per event when stderr is a file or pipe, or nothing.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace shardlm::io::hub {

enum class ProgressMode {
  automatic,  // bars on a terminal, lines otherwise
  bars,
  lines,
  quiet,
};

// "0 B", "999 B", "1.50 kB", "12.3 MB", "456 MB": three digits, decimal units, as the hub shows sizes.
std::string format_bytes(uint64_t bytes);
// "0:07", "12:30", "1:02:03".
std::string format_duration(double seconds);

// One per batch of downloads; the parallel download threads report into it.
class DownloadProgress {
 public:
  DownloadProgress(ProgressMode mode, uint64_t total_bytes, size_t file_count, std::FILE* out = stderr);
  ~DownloadProgress();  // leaves the final state (or a summary line) behind
  DownloadProgress(const DownloadProgress&) = delete;
  DownloadProgress& operator=(const DownloadProgress&) = delete;

  // `resumed_from` bytes are already on disk from an interrupted download.
  void start(const std::string& filename, uint64_t size, uint64_t resumed_from);
  void advance(const std::string& filename, uint64_t bytes);
  // The server ignored the resume request and sends the file from its first byte.
  void restart(const std::string& filename);
  void finish(const std::string& filename);
  // Another process downloaded the file while this one waited for it.
  void found_complete(const std::string& filename, uint64_t size);

 private:
  using Clock = std::chrono::steady_clock;
  struct FileState {
    uint64_t size = 0, done = 0, resumed_from = 0;
    Clock::time_point started, last_line;
    bool finished = false;
  };

  void draw_bars(bool force);
  void print_line(const std::string& text);
  std::string file_status(const std::string& filename, const FileState& file, Clock::time_point now) const;
  std::string total_status(Clock::time_point now) const;
  size_t terminal_columns() const;

  std::mutex mutex_;
  ProgressMode mode_;
  std::FILE* out_;
  uint64_t total_bytes_, transferred_ = 0, resumed_bytes_ = 0;
  size_t file_count_, finished_count_ = 0;
  std::map<std::string, FileState> files_;
  Clock::time_point started_, last_draw_;
  size_t drawn_lines_ = 0;
};

}  // namespace shardlm::io::hub
