#include "meshtrain/data/bpe/bpe_trainer.hpp"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <queue>
#include <unordered_map>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/bpe/byte_unicode.hpp"
#include "meshtrain/data/bpe/pretokenizer.hpp"

namespace meshtrain::bpe {
namespace {

using Pair = std::pair<int32_t, int32_t>;
uint64_t key(Pair p) { return (uint64_t(uint32_t(p.first)) << 32) | uint32_t(p.second); }
Pair pair_of(uint64_t k) { return {int32_t(k >> 32), int32_t(k & 0xFFFFFFFFu)}; }

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using WordCounts = std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>>;

constexpr size_t kCountChunkBytes = 1 << 20;

// Distinct pieces and their counts, line by line, on several threads.
std::vector<std::pair<std::string, int64_t>> count_words(std::string_view corpus, int threads,
                                                         FunctionRef<void(TrainPhase, size_t, size_t)> progress) {
  // Chunks end after a newline (or at the end), so no line is cut.
  std::vector<std::pair<size_t, size_t>> chunks;
  for (size_t b = 0; b < corpus.size();) {
    size_t e = b + kCountChunkBytes >= corpus.size() ? corpus.size() : corpus.find('\n', b + kCountChunkBytes);
    e = e == std::string_view::npos || e >= corpus.size() ? corpus.size() : e + 1;
    chunks.emplace_back(b, e);
    b = e;
  }
  const Pretokenizer regex;
  const int nt = std::max(1, std::min<int>(threads > 0 ? threads : omp_get_max_threads(),
                                           static_cast<int>(std::max<size_t>(1, chunks.size()))));
  std::vector<WordCounts> per_thread(static_cast<size_t>(nt));
  size_t done = 0;
  std::exception_ptr error;
#pragma omp parallel num_threads(nt)
  {
    WordCounts& counts = per_thread[static_cast<size_t>(omp_get_thread_num())];
    std::unique_ptr<Pretokenizer::Scratch> scratch;
#pragma omp for schedule(dynamic, 1)
    for (size_t c = 0; c < chunks.size(); ++c) {
      try {
        if (!scratch) scratch = std::make_unique<Pretokenizer::Scratch>(regex);
        const std::string_view chunk = corpus.substr(chunks[c].first, chunks[c].second - chunks[c].first);
        for (size_t b = 0; b < chunk.size();) {
          const size_t nl = chunk.find('\n', b);
          const size_t e = nl == std::string_view::npos ? chunk.size() : nl + 1;
          regex.split(chunk.substr(b, e - b), *scratch, [&](std::string_view piece) {
            if (const auto it = counts.find(piece); it != counts.end())
              ++it->second;
            else
              counts.emplace(std::string(piece), 1);
          });
          b = e;
        }
      } catch (...) {
#pragma omp critical(meshtrain_bpe_train_error)
        if (!error) error = std::current_exception();
      }
#pragma omp critical(meshtrain_bpe_train_progress)
      {
        done += chunks[c].second - chunks[c].first;
        progress(TrainPhase::CountWords, done, corpus.size());
      }
    }
  }
  if (error) std::rethrow_exception(error);
  WordCounts& all = per_thread[0];
  for (size_t t = 1; t < per_thread.size(); ++t)
    for (auto& [word, n] : per_thread[t]) all[word] += n;
  std::vector<std::pair<std::string, int64_t>> words(all.begin(), all.end());
  std::sort(words.begin(), words.end());  // a fixed order: the results do not depend on it, the work does
  return words;
}

// One merge of (a, b) into `merged` in a word, left to right, and the
// pair-count changes it makes (as tokenizers' Word::merge).
void merge_word(std::vector<int32_t>& symbols, Pair ab, int32_t merged, std::vector<std::pair<Pair, int>>& changes) {
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (symbols[i] != ab.first || i + 1 >= symbols.size() || symbols[i + 1] != ab.second) continue;
    if (i > 0) {
      changes.push_back({{symbols[i - 1], ab.first}, -1});
      changes.push_back({{symbols[i - 1], merged}, +1});
    }
    symbols[i] = merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    if (i + 1 < symbols.size()) {
      changes.push_back({{ab.second, symbols[i + 1]}, -1});
      changes.push_back({{merged, symbols[i + 1]}, +1});
    }
  }
}

// A pair waiting to be merged: its count when pushed, and the words it may
// occur in. The heap's top is the highest count, then the smallest pair.
struct Candidate {
  int64_t count;
  Pair pair;
  std::vector<uint32_t> words;
};
struct Lower {
  bool operator()(const Candidate& x, const Candidate& y) const {
    return x.count != y.count ? x.count < y.count : x.pair > y.pair;
  }
};

}  // namespace

TokenizerSpec train_bpe(std::string_view corpus, const BpeTrainerOptions& options,
                        FunctionRef<void(TrainPhase, size_t, size_t)> progress) {
  TokenizerSpec spec;
  std::unordered_map<std::string, int32_t> id_of;
  const auto add_token = [&](const std::string& text) {
    const auto [it, added] = id_of.emplace(text, static_cast<int32_t>(spec.vocab.size()));
    if (added) spec.vocab.push_back(text);
    return it->second;
  };
  for (const std::string& s : options.special_tokens) {
    if (s.empty()) throw ConfigError("tokenizer-train: a special token is empty");
    if (id_of.contains(s)) continue;
    spec.added.push_back({.content = s, .id = add_token(s), .special = true});
  }
  const int64_t base = static_cast<int64_t>(spec.vocab.size()) + 256;
  if (options.vocab_size < base)
    throw ConfigError("tokenizer-train: --vocab-size " + std::to_string(options.vocab_size) +
                      " is below the " + std::to_string(base) + " tokens it starts with (" +
                      std::to_string(spec.vocab.size()) + " special + 256 bytes)");
  // The bytes in the code point order of their GPT-2 characters.
  std::vector<uint8_t> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = static_cast<uint8_t>(b);
  std::sort(bytes.begin(), bytes.end(), [](uint8_t x, uint8_t y) { return byte_to_unicode(x) < byte_to_unicode(y); });
  std::array<int32_t, 256> byte_id{};
  for (const uint8_t b : bytes) byte_id[b] = add_token(bytes_to_token_text(std::string(1, char(b))));

  const auto counted = count_words(corpus, options.threads, progress);
  std::vector<std::vector<int32_t>> words(counted.size());
  std::vector<int64_t> counts(counted.size());
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  for (size_t w = 0; w < counted.size(); ++w) {
    counts[w] = counted[w].second;
    for (const char c : counted[w].first) words[w].push_back(byte_id[static_cast<uint8_t>(c)]);
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t k = key({words[w][i], words[w][i + 1]});
      pair_count[k] += counts[w];
      auto& list = where[k];
      if (list.empty() || list.back() != w) list.push_back(static_cast<uint32_t>(w));
    }
  }
  std::priority_queue<Candidate, std::vector<Candidate>, Lower> heap;
  const auto push_updates = [&] {
    for (auto& [k, list] : where) {
      const int64_t n = pair_count[k];
      if (n > 0) heap.push({n, pair_of(k), std::move(list)});
    }
    where.clear();
  };
  push_updates();

  const auto wanted = static_cast<size_t>(options.vocab_size - base);
  std::vector<std::pair<Pair, int>> changes;
  while (static_cast<int64_t>(spec.vocab.size()) < options.vocab_size && !heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    const int64_t now = pair_count[key(top.pair)];
    if (top.count != now) {  // stale: other merges took some occurrences
      top.count = now;
      heap.push(std::move(top));
      continue;
    }
    if (top.count < 1 || top.count < options.min_frequency) break;
    const int32_t merged = add_token(spec.vocab[top.pair.first] + spec.vocab[top.pair.second]);
    spec.merges.emplace_back(spec.vocab[top.pair.first], spec.vocab[top.pair.second]);
    for (const uint32_t w : top.words) {
      changes.clear();
      merge_word(words[w], top.pair, merged, changes);
      for (const auto& [p, change] : changes) {
        const uint64_t k = key(p);
        pair_count[k] += change * counts[w];
        if (change > 0) {
          auto& list = where[k];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
      }
    }
    push_updates();
    progress(TrainPhase::Merge, spec.merges.size(), wanted);
  }
  return spec;
}

}  // namespace meshtrain::bpe
