#include "generation/perplexity.h"

#include <cmath>
#include <vector>

#include "backends/cpu/reference_kernels.h"
#include "core/error.h"

namespace shardlm::generation {

Perplexity perplexity(Generator& generator, std::span<const int64_t> tokens, const PerplexityOptions& options,
                      const std::function<void(int64_t, double)>& progress) {
  const int64_t context = options.context, total = static_cast<int64_t>(tokens.size());
  if (context < 4) fail("perplexity: the context must be at least 4 tokens, got ", context);
  int64_t chunks = total / context;
  if (options.max_chunks > 0) chunks = std::min(chunks, options.max_chunks);
  if (chunks == 0)
    fail("perplexity: the text is ", total, " tokens, shorter than one chunk of ", context,
         ": give a longer text or a smaller context");
  generator.ensure_cache(1, context);
  const int64_t first = context / 2;  // positions scored: first .. context - 2, each predicting the next token
  double sum = 0, sum_squares = 0;
  int64_t count = 0;
  std::vector<int64_t> chunk(static_cast<size_t>(context));
  std::vector<float> log_probabilities;
  for (int64_t c = 0; c < chunks; ++c) {
    std::copy_n(tokens.begin() + c * context, context, chunk.begin());
    if (options.bos_id) chunk[0] = *options.bos_id;
    const Tensor logits = generator.forward(chunk, 0, /*all_positions=*/true);  // [context, vocab]
    const int64_t vocab = logits.shape()[1];
    log_probabilities.resize(static_cast<size_t>(vocab));
    for (int64_t position = first; position < context - 1; ++position) {
      const std::span<const float> row(logits.data<float>() + position * vocab, static_cast<size_t>(vocab));
      backends::reference::log_softmax(row, log_probabilities);
      const double nll = -log_probabilities[static_cast<size_t>(chunk[static_cast<size_t>(position + 1)])];
      sum += nll;
      sum_squares += nll * nll;
      ++count;
    }
    if (progress) progress(c + 1, std::exp(sum / static_cast<double>(count)));
  }
  const double mean = sum / static_cast<double>(count);
  const double variance = sum_squares / static_cast<double>(count) - mean * mean;
  Perplexity result{.perplexity = std::exp(mean), .chunks = chunks, .scored_tokens = count};
  if (variance > 0 && count > 1) result.error = std::sqrt(variance / static_cast<double>(count - 1)) * result.perplexity;
  return result;
}

}  // namespace shardlm::generation
