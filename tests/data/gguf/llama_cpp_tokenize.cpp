// llama.cpp's tokenization of JSON-string lines, for make_vocab_gguf.py (run by hand,
// never built by CMake; build as llama_cpp_greedy.cpp says):
//   llama_cpp_tokenize VOCAB.gguf < corpus.jsonl     one line of comma-separated ids a line
// Each line is a JSON string with only the escapes \" \\ \/ \b \f \n \r \t \uXXXX; special
// tokens in the text are parsed (parse_special), and no BOS is added.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>
#include "llama.h"

namespace {

void append_utf8(std::string& out, unsigned code) {
  if (code < 0x80) out += static_cast<char>(code);
  else if (code < 0x800) out += static_cast<char>(0xC0 | (code >> 6)), out += static_cast<char>(0x80 | (code & 0x3F));
  else if (code < 0x10000)
    out += static_cast<char>(0xE0 | (code >> 12)), out += static_cast<char>(0x80 | ((code >> 6) & 0x3F)),
        out += static_cast<char>(0x80 | (code & 0x3F));
  else
    out += static_cast<char>(0xF0 | (code >> 18)), out += static_cast<char>(0x80 | ((code >> 12) & 0x3F)),
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F)), out += static_cast<char>(0x80 | (code & 0x3F));
}

std::string unquote(const std::string& line) {
  std::string out;
  for (size_t i = 1; i + 1 < line.size(); ++i) {
    if (line[i] != '\\') { out += line[i]; continue; }
    const char c = line[++i];
    if (c == 'n') out += '\n'; else if (c == 'r') out += '\r'; else if (c == 't') out += '\t';
    else if (c == 'b') out += '\b'; else if (c == 'f') out += '\f';
    else if (c == 'u') {
      unsigned code = std::stoul(line.substr(i + 1, 4), nullptr, 16);
      i += 4;
      if (code >= 0xD800 && code < 0xDC00 && line[i + 1] == '\\' && line[i + 2] == 'u') {
        const unsigned low = std::stoul(line.substr(i + 3, 4), nullptr, 16);
        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        i += 6;
      }
      append_utf8(out, code);
    } else out += c;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], params);
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  for (std::string line; std::getline(std::cin, line);) {
    const std::string text = unquote(line);
    std::vector<llama_token> ids(text.size() + 16);
    const int count = llama_tokenize(vocab, text.data(), static_cast<int>(text.size()), ids.data(),
                                     static_cast<int>(ids.size()), /*add_special=*/false, /*parse_special=*/true);
    if (count < 0) return 2;
    for (int i = 0; i < count; ++i) std::printf(i ? ",%d" : "%d", ids[i]);
    std::printf("\n");
  }
}
