#pragma once
// What a run's throughput counts: tokens for text (block_size predictions
// per sample), samples for images.
#include <cstdint>

#include "meshtrain/data/dataset.hpp"

namespace meshtrain {

struct ThroughputUnit {
  int64_t per_sample = 1;                     // predictions per sample
  const char* unit = "samples/s";             // in progress lines
  const char* metric = "samples_per_s";       // the metrics record's key
  const char* flop_metric = "flop_per_sample";  // the key of the model FLOPs per prediction (mfu's count)
};

inline ThroughputUnit throughput_unit(DataKind data, int64_t block_size) {
  if (data == DataKind::Text || data == DataKind::Tokens) return {block_size, "tok/s", "tokens_per_s", "flop_per_token"};
  return {};
}

}  // namespace meshtrain
