#pragma once
// Text sampling from a GPT: temperature and top-k over the logits of the last
// position, with a seeded RNG so one seed gives one text. The prompt is
// encoded and the result decoded by the run's codec (bytes, or its BPE
// tokenizer: data/text_codec.hpp).
#include <cstdint>
#include <string>

#include "meshtrain/data/text_codec.hpp"
#include "meshtrain/nn/gpt.hpp"

namespace meshtrain {

struct SamplingOptions {
  int64_t tokens = 200;     // tokens to add after the prompt
  double temperature = 0.8; // 0: greedy
  int64_t top_k = 40;       // 0: the whole vocabulary
  uint64_t seed = 1;
};

// Returns the prompt followed by the sampled tokens, decoded. Only ids the
// codec knows are sampled (a model's vocabulary may be padded beyond them).
// The context slides when the text outgrows the model's block_size.
std::string generate_text(Gpt& model, const TextCodec& codec, const std::string& prompt,
                          const SamplingOptions& options);

}  // namespace meshtrain
