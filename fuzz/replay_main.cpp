// Replays inputs through a harness without libFuzzer: every file named, or every file in
// a directory named, goes once through LLVMFuzzerTestOneInput. The test suite runs each
// harness this way over its regression inputs (tests/data/fuzz/<harness>/, the inputs of
// past findings) and its seeds, in the normal build and under the sanitizers alike.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path(argv[i]);
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path))
        if (entry.is_regular_file()) replay(entry.path()), ++inputs;
    } else if (std::filesystem::exists(path)) {
      replay(path), ++inputs;
    }
  }
  std::printf("replayed %zu inputs\n", inputs);
  return 0;
}
