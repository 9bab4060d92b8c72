#include "meshtrain/train/loop/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/rng.hpp"

namespace meshtrain {

std::string generate_text(Gpt& model, const TextCodec& codec, const std::string& prompt,
                          const SamplingOptions& options) {
  if (prompt.empty()) throw ConfigError("--prompt: must not be empty");
  const int64_t block = model.config().block_size;
  std::vector<int32_t> tokens = codec.encode(prompt);
  if (tokens.empty()) throw ConfigError("--prompt: encodes to no tokens");
  for (const int32_t t : tokens)
    if (t >= model.config().vocab_size)
      throw ConfigError("--prompt: encodes to token " + std::to_string(t) + ", outside the model's vocabulary of " +
                        std::to_string(model.config().vocab_size) + " (is this the tokenizer the run trained with?)");
  Rng rng(options.seed);
  std::vector<int32_t> order;
  std::vector<double> probs;
  for (int64_t i = 0; i < options.tokens; ++i) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(tokens.size()) - block);
    auto logits = model.last_logits(std::span<const int32_t>(tokens).subspan(start));
    const auto V = static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(logits.size()), codec.vocab_size()));
    order.resize(V);
    std::iota(order.begin(), order.end(), 0);
    // Highest logits first; ties broken by id so sampling is deterministic.
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    int32_t next = order[0];
    if (options.temperature > 0) {
      const int64_t k = options.top_k > 0 ? std::min<int64_t>(options.top_k, V) : V;
      probs.assign(k, 0.0);
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) {
        probs[j] = std::exp((logits[order[j]] - logits[order[0]]) / options.temperature);
        sum += probs[j];
      }
      double u = rng.uniform() * sum;
      for (int64_t j = 0; j < k; ++j) {
        if ((u -= probs[j]) <= 0 || j == k - 1) {
          next = order[j];
          break;
        }
      }
    }
    tokens.push_back(next);
  }
  return codec.decode(tokens);
}

}  // namespace meshtrain
