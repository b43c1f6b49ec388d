// Progress output: plain lines for logs and pipes, bars redrawn in place on a terminal.
#include <gtest/gtest.h>

#include <cstdio>

#include "io/hub/progress.h"
#include "io/hub_test_environment.h"

namespace shardlm::testing {
namespace {
using io::hub::DownloadProgress;
using io::hub::ProgressMode;

std::string contents_of(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  return text;
}

std::string report(ProgressMode mode) {
  std::FILE* out = std::tmpfile();
  {
    DownloadProgress progress(mode, 3000000, 2, out);
    progress.start("model-00001.safetensors", 2000000, 500000);
    progress.start("config.json", 1000000, 0);
    progress.advance("model-00001.safetensors", 1500000);
    progress.finish("model-00001.safetensors");
    progress.advance("config.json", 1000000);
    progress.finish("config.json");
  }
  std::string text = contents_of(out);
  std::fclose(out);
  return text;
}

TEST(HubProgress, FormatsSizesAndDurations) {
  EXPECT_EQ(io::hub::format_bytes(0), "0 B");
  EXPECT_EQ(io::hub::format_bytes(999), "999 B");
  EXPECT_EQ(io::hub::format_bytes(1500), "1.50 kB");
  EXPECT_EQ(io::hub::format_bytes(12345678), "12.3 MB");
  EXPECT_EQ(io::hub::format_bytes(456000000), "456 MB");
  EXPECT_EQ(io::hub::format_bytes(999999999), "1.00 GB");
  EXPECT_EQ(io::hub::format_duration(7), "0:07");
  EXPECT_EQ(io::hub::format_duration(750), "12:30");
  EXPECT_EQ(io::hub::format_duration(3723), "1:02:03");
}

TEST(HubProgress, LinesNameEachFileAndTheTotal) {
  const std::string text = report(ProgressMode::lines);
  EXPECT_TRUE(contains(text, "[shardlm] downloading model-00001.safetensors (2.00 MB, resuming at 500 kB)\n")) << text;
  EXPECT_TRUE(contains(text, "[shardlm] downloading config.json (1.00 MB)\n")) << text;
  EXPECT_TRUE(contains(text, "[shardlm] downloaded model-00001.safetensors (2.00 MB in 0:00)\n")) << text;
  EXPECT_TRUE(contains(text, "[shardlm] downloaded 2 of 2 files (2.50 MB in 0:00)\n")) << text;
  EXPECT_FALSE(contains(text, "\x1b[")) << text;
}

TEST(HubProgress, BarsRedrawInPlaceAndEndWithTheTotal) {
  const std::string text = report(ProgressMode::bars);
  EXPECT_TRUE(contains(text, "\x1b[")) << text;
  EXPECT_TRUE(contains(text, "downloaded config.json (1.00 MB in 0:00)")) << text;
  EXPECT_TRUE(contains(text, "100% [############] 3.00 MB/3.00 MB")) << text;
  EXPECT_TRUE(text.ends_with("\n")) << text;
}

TEST(HubProgress, AFileAnotherProcessDownloadedCountsAsDone) {
  std::FILE* out = std::tmpfile();
  {
    DownloadProgress progress(ProgressMode::lines, 3000, 2, out);
    progress.found_complete("model.safetensors", 2000);
    progress.start("config.json", 1000, 0);
    progress.advance("config.json", 1000);
    progress.finish("config.json");
  }
  const std::string text = contents_of(out);
  std::fclose(out);
  EXPECT_TRUE(contains(text, "[shardlm] model.safetensors was downloaded by another process\n")) << text;
  EXPECT_TRUE(contains(text, "[shardlm] downloaded 2 of 2 files (1.00 kB in 0:00)\n")) << text;
}

TEST(HubProgress, QuietPrintsNothing) { EXPECT_EQ(report(ProgressMode::quiet), ""); }

}  // namespace
}  // namespace shardlm::testing
