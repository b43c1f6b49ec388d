// Single-threaded encode throughput and tokenizer.json load time.
//
//   tokenizer_bench --tokenizer DIR_OR_TOKENIZER_JSON [--text FILE] [--min-mb 10]
//                   [--dump-text FILE] [--python PYTHON]
//
// Without --text, the text is made from the test corpus (tests/data/tokenizers/corpus.jsonl):
// each line joins one to three random corpus strings and a random number, so lines
// rarely repeat (words do, as in real text), until it holds --min-mb megabytes. --dump-text writes that text so bench/tokenizer_rust.py can encode the same
// lines; --python runs that script in the same process run and prints both figures.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) shardlm::fail("cannot open ", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Corpus strings with their newlines turned into spaces, so that one line is one string.
std::vector<std::string> corpus_lines(const std::string& corpus_path, double min_mb) {
  std::vector<std::string> strings;
  for (const std::string& line : split_lines(read_file(corpus_path))) {
    if (line.empty()) continue;
    std::string s = nlohmann::json::parse(line).get<std::string>();
    std::replace(s.begin(), s.end(), '\n', ' ');
    std::replace(s.begin(), s.end(), '\r', ' ');
    if (!s.empty()) strings.push_back(s);
  }
  std::vector<std::string> lines;
  std::mt19937 rng(12345);
  size_t bytes = 0;
  while (bytes < static_cast<size_t>(min_mb * 1e6)) {
    std::string line;
    int parts = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < parts; ++i) {
      line += strings[rng() % strings.size()];
      line += ' ';
    }
    line += std::to_string(rng() % 100000);
    bytes += line.size() + 1;
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, text_path, dump_path, python;
  std::string corpus_path = std::string(SHARDLM_SOURCE_DIR) + "/tests/data/tokenizers/corpus.jsonl";
  double min_mb = 10;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--tokenizer") tokenizer_path = value();
    else if (arg == "--text") text_path = value();
    else if (arg == "--dump-text") dump_path = value();
    else if (arg == "--python") python = value();
    else if (arg == "--corpus") corpus_path = value();
    else if (arg == "--min-mb") min_mb = std::stod(value());
    else {
      std::cerr << "unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (tokenizer_path.empty()) {
    std::cerr << "usage: tokenizer_bench --tokenizer DIR_OR_TOKENIZER_JSON [--text FILE] [--min-mb 10]"
                 " [--dump-text FILE] [--python PYTHON]\n";
    return 2;
  }
  if (std::filesystem::is_directory(tokenizer_path)) tokenizer_path += "/tokenizer.json";

  try {
    // Load time: the best of three, file read included.
    double load_seconds = 1e9;
    shardlm::tokenizer::Tokenizer tokenizer = shardlm::tokenizer::Tokenizer::from_file(tokenizer_path);
    for (int round = 0; round < 3; ++round) {
      auto start = Clock::now();
      tokenizer = shardlm::tokenizer::Tokenizer::from_file(tokenizer_path);
      load_seconds = std::min(load_seconds, seconds_since(start));
    }

    std::vector<std::string> lines =
        text_path.empty() ? corpus_lines(corpus_path, min_mb) : split_lines(read_file(text_path));
    size_t bytes = 0;
    for (const std::string& line : lines) bytes += line.size() + 1;
    if (!dump_path.empty() || !python.empty()) {
      if (dump_path.empty()) dump_path = (std::filesystem::temp_directory_path() / "shardlm_bench_text.txt").string();
      std::ofstream out(dump_path, std::ios::binary);
      for (const std::string& line : lines) out << line << '\n';
    }

    // The first pass warms the word cache, as the Rust library's own cache is warm in
    // its benchmark; the second is timed.
    size_t tokens = 0;
    for (const std::string& line : lines) tokens += tokenizer.encode(line, false).size();
    auto start = Clock::now();
    tokens = 0;
    for (const std::string& line : lines) tokens += tokenizer.encode(line, false).size();
    double encode_seconds = seconds_since(start);
    double mb_per_s = static_cast<double>(bytes) / 1e6 / encode_seconds;

    std::printf("tokenizer:  %s\n", tokenizer_path.c_str());
    std::printf("load:       %.1f ms\n", load_seconds * 1e3);
    std::printf("text:       %.2f MB in %zu lines -> %zu tokens\n", static_cast<double>(bytes) / 1e6, lines.size(), tokens);
    std::printf("shardlm:    %.2f MB/s (1 thread)\n", mb_per_s);
    std::fflush(stdout);

    if (!python.empty()) {
      std::string script = std::string(SHARDLM_SOURCE_DIR) + "/bench/tokenizer_rust.py";
      std::string command = python + " " + script + " --tokenizer '" + tokenizer_path + "' --text '" + dump_path +
                            "' --shardlm-mb-per-s " + std::to_string(mb_per_s);
      return std::system(command.c_str()) == 0 ? 0 : 1;
    }
  } catch (const shardlm::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
