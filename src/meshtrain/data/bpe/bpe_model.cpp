#include "meshtrain/data/bpe/bpe_model.hpp"

#include <queue>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/bpe/byte_unicode.hpp"

namespace meshtrain::bpe {

BpeModel::BpeModel(const std::vector<std::pair<std::string, int32_t>>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : options_(options) {
  int32_t max_id = -1;
  for (const auto& [text, id] : vocab) {
    if (id < 0) throw DataError("BPE vocabulary: token '" + text + "' has a negative id " + std::to_string(id));
    max_id = std::max(max_id, id);
  }
  id_to_text_.resize(static_cast<size_t>(max_id + 1));
  has_id_.assign(id_to_text_.size(), false);
  text_to_id_.reserve(vocab.size());
  for (const auto& [text, id] : vocab) {
    if (has_id_[id])
      throw DataError("BPE vocabulary: id " + std::to_string(id) + " is given to both '" + id_to_text_[id] +
                      "' and '" + text + "'");
    if (!text_to_id_.emplace(text, id).second)
      throw DataError("BPE vocabulary: token '" + text + "' appears twice");
    id_to_text_[id] = text;
    has_id_[id] = true;
  }
  for (int b = 0; b < 256; ++b) {
    const std::optional<int32_t> id = token_id(bytes_to_token_text(std::string(1, static_cast<char>(b))));
    byte_id_[b] = id.value_or(-1);
  }
  if (options_.unk_id && (*options_.unk_id < 0 || *options_.unk_id > max_id || !has_id_[*options_.unk_id]))
    throw DataError("BPE vocabulary: the unknown token's id " + std::to_string(*options_.unk_id) +
                    " is not in the vocabulary");
  merge_of_.reserve(merges.size());
  merge_pairs_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const std::optional<int32_t> a = token_id(left), b = token_id(right), merged = token_id(left + right);
    if (!a || !b || !merged)
      throw DataError("BPE merges: merge " + std::to_string(rank) + " '" + left + " " + right + "': '" +
                      (!a ? left : !b ? right : left + right) + "' is not in the vocabulary");
    // A repeated pair keeps its last rank, as Hugging Face's map does.
    merge_of_[pair_key(*a, *b)] = Merge{static_cast<int32_t>(rank), *merged};
    merge_pairs_.emplace_back(*a, *b);
  }
}

const std::string* BpeModel::token_text(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(id_to_text_.size()) || !has_id_[id]) return nullptr;
  return &id_to_text_[id];
}

std::optional<int32_t> BpeModel::token_id(std::string_view text) const {
  const auto it = text_to_id_.find(text);
  if (it == text_to_id_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  const auto it = merge_of_.find(pair_key(a, b));
  return it == merge_of_.end() ? nullptr : &it->second;
}

void BpeModel::encode_piece(std::string_view raw, std::vector<int32_t>& out) const {
  if (raw.empty()) return;
  if (options_.ignore_merges)
    if (const std::optional<int32_t> id = token_id(bytes_to_token_text(raw))) {
      out.push_back(*id);
      return;
    }

  // Terms: a symbol is a token of the piece so far, in a list linked by
  // prev/next over the positions of the bytes it started as; merging keeps
  // the left symbol and retires the right. A candidate is (rank, pos,
  // new_id): the merge of the symbol at pos with its next. Candidates wait
  // in a heap, lowest rank first, then leftmost; one whose symbols have
  // changed since it was pushed is stale and skipped.
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(raw.size());
  const auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1, true});
    if (n > 0) symbols[n - 1].next = n;
  };
  int32_t unk = -1;  // a run of unknown bytes not yet added: the unknown token's id
  for (const char c : raw) {
    const int32_t id = byte_id_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      if (unk >= 0) add(unk), unk = -1;
      add(id);
    } else if (options_.unk_id) {
      if (unk >= 0 && !options_.fuse_unk) add(unk);
      unk = *options_.unk_id;
    }
  }
  if (unk >= 0) add(unk);
  if (symbols.empty()) return;

  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i)
    if (const Merge* m = find_merge(symbols[i].id, symbols[i + 1].id)) heap.push({m->rank, i, m->new_id});
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const Merge* m = find_merge(left.id, right.id);
    if (!m || m->new_id != top.new_id) continue;  // stale
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0)
      if (const Merge* p = find_merge(symbols[left.prev].id, left.id)) heap.push({p->rank, left.prev, p->new_id});
    if (left.next >= 0)
      if (const Merge* n = find_merge(left.id, symbols[left.next].id)) heap.push({n->rank, top.pos, n->new_id});
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);  // symbol 0 is never retired
}

void BpeModel::Cache::encode(const BpeModel& model, std::string_view raw, std::vector<int32_t>& out) {
  if (const auto it = index_.find(raw); it != index_.end()) {
    const auto [first, count] = it->second;
    out.insert(out.end(), ids_.begin() + first, ids_.begin() + first + count);
    return;
  }
  scratch_.clear();
  model.encode_piece(raw, scratch_);
  out.insert(out.end(), scratch_.begin(), scratch_.end());
  if (index_.size() < kMaxEntries && ids_.size() + scratch_.size() < UINT32_MAX) {
    index_.emplace(std::string(raw), std::pair{static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(scratch_.size())});
    ids_.insert(ids_.end(), scratch_.begin(), scratch_.end());
  }
}

}  // namespace meshtrain::bpe
