#include "meshtrain/data/bpe/bpe_tokenizer.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <unordered_map>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/bpe/byte_unicode.hpp"

namespace meshtrain::bpe {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_printable_ascii(char c) { return c > ' ' && c < 0x7F; }

// Chunks of a stretch that threads encode apart.
constexpr size_t kChunkBytes = 256 * 1024;

// The first position p >= from in (begin, end) where a chunk may start:
// text[p-1] is a newline, text[p-2] and text[p] printable ASCII. No regex
// piece crosses it (pieces holding a newline hold only white space), and the
// pieces before it end the same whether or not the text goes on: the
// newline is one piece either way. end when there is none.
size_t chunk_start_from(std::string_view text, size_t from, size_t begin, size_t end) {
  for (size_t p = std::max(from, begin + 2); p < end; ++p) {
    p = text.find('\n', p - 1);
    if (p == std::string_view::npos || ++p >= end) return end;
    if (is_printable_ascii(text[p - 2]) && is_printable_ascii(text[p])) return p;
  }
  return end;
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeModel model, std::vector<AddedToken> added, PreTokenizerOptions pre)
    : model_(std::move(model)), added_(std::move(added)), pre_(pre), regex_(std::make_unique<Pretokenizer>()) {
  for (const AddedToken& t : added_) {
    if (t.content.empty()) throw DataError("tokenizer: an added token (id " + std::to_string(t.id) + ") is empty");
    if (t.id < 0) throw DataError("tokenizer: added token '" + t.content + "' has a negative id");
  }
}

std::vector<BpeTokenizer::Segment> BpeTokenizer::split_added(std::string_view text) const {
  std::vector<Segment> segments;
  const size_t n = text.size();
  // next[k]: where added token k occurs next at or after `from` (npos: never).
  std::vector<size_t> next(added_.size());
  for (size_t k = 0; k < added_.size(); ++k) next[k] = text.find(added_[k].content);
  size_t at = 0, from = 0;
  while (!added_.empty()) {
    size_t start = std::string_view::npos, len = 0;
    const AddedToken* token = nullptr;
    for (size_t k = 0; k < added_.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < from) next[k] = text.find(added_[k].content, from);
      if (next[k] == std::string_view::npos) continue;
      if (next[k] < start || (next[k] == start && added_[k].content.size() > len))
        start = next[k], len = added_[k].content.size(), token = &added_[k];
    }
    if (!token) break;
    size_t stop = start + len;
    if (token->lstrip)
      while (start > at && is_space(text[start - 1])) --start;
    if (token->rstrip)
      while (stop < n && is_space(text[stop])) ++stop;
    if (start > at) segments.push_back({at, start, -1});
    segments.push_back({start, stop, token->id});
    at = from = stop;
  }
  if (at < n) segments.push_back({at, n, -1});
  return segments;
}

void BpeTokenizer::encode_chunk(std::string_view text, bool prefix, Pretokenizer::Scratch& scratch,
                                BpeModel::Cache& cache, std::vector<int32_t>& out) const {
  std::string with_space;
  if (prefix && pre_.add_prefix_space && !text.starts_with(' ')) {
    with_space.reserve(text.size() + 1);
    with_space.push_back(' ');
    with_space.append(text);
    text = with_space;
  }
  if (!pre_.use_regex) {
    cache.encode(model_, text, out);
    return;
  }
  regex_->split(text, scratch, [&](std::string_view piece) { cache.encode(model_, piece, out); });
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  return encode(text, 1, [](size_t, size_t) {});
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, int threads,
                                          FunctionRef<void(size_t, size_t)> progress) const {
  // Work items: each added token, and each chunk of the stretches between them.
  struct Item {
    size_t begin, end;
    int32_t added_id;  // -1: text to encode
    bool prefix;       // the first chunk of its stretch
  };
  std::vector<Item> items;
  for (const Segment& s : split_added(text)) {
    if (s.added_id >= 0 || !pre_.use_regex) {
      items.push_back({s.begin, s.end, s.added_id, true});
      continue;
    }
    for (size_t b = s.begin; b < s.end;) {
      const size_t e = b + kChunkBytes >= s.end ? s.end : chunk_start_from(text, b + kChunkBytes, s.begin, s.end);
      items.push_back({b, e, -1, b == s.begin});
      b = e;
    }
  }

  const int nt = std::max(1, std::min<int>(threads > 0 ? threads : omp_get_max_threads(),
                                           static_cast<int>(std::max<size_t>(1, items.size()))));
  std::vector<std::vector<int32_t>> outs(items.size());
  std::atomic<size_t> done{0};
  std::exception_ptr error;
#pragma omp parallel num_threads(nt)
  {
    std::unique_ptr<Pretokenizer::Scratch> scratch;
    BpeModel::Cache cache;
#pragma omp for schedule(dynamic, 1)
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& it = items[i];
      try {
        if (it.added_id >= 0) {
          outs[i].push_back(it.added_id);
        } else {
          if (!scratch) scratch = std::make_unique<Pretokenizer::Scratch>(*regex_);
          outs[i].reserve((it.end - it.begin) / 3);
          encode_chunk(text.substr(it.begin, it.end - it.begin), it.prefix, *scratch, cache, outs[i]);
        }
      } catch (...) {
#pragma omp critical(meshtrain_bpe_error)
        if (!error) error = std::current_exception();
      }
      const size_t now = done += it.end - it.begin;
#pragma omp critical(meshtrain_bpe_progress)
      progress(now, text.size());
    }
  }
  if (error) std::rethrow_exception(error);
  size_t total = 0;
  for (const auto& o : outs) total += o.size();
  std::vector<int32_t> ids;
  ids.reserve(total);
  for (auto& o : outs) {
    ids.insert(ids.end(), o.begin(), o.end());
    std::vector<int32_t>().swap(o);
  }
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int32_t> tokens) const {
  std::unordered_map<int32_t, const std::string*> added;
  for (const AddedToken& t : added_) added.emplace(t.id, &t.content);
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    if (const auto it = added.find(id); it != added.end()) {
      out += *it->second;
      continue;
    }
    const std::string* text = model_.token_text(id);
    if (!text)
      throw DataError("tokenizer: token " + std::to_string(id) + " at position " + std::to_string(i) +
                      " is not in the vocabulary of " + std::to_string(vocab_size()));
    if (const std::optional<std::string> bytes = token_text_to_bytes(*text))
      out += *bytes;
    else
      out += *text;
  }
  return out;
}

int64_t BpeTokenizer::vocab_size() const {
  int64_t n = model_.vocab_size();
  for (const AddedToken& t : added_) n = std::max<int64_t>(n, int64_t{t.id} + 1);
  return n;
}

}  // namespace meshtrain::bpe
