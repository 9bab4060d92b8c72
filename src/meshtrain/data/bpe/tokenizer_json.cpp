#include "meshtrain/data/bpe/tokenizer_json.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "meshtrain/core/error.hpp"

namespace meshtrain::bpe {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void bad(const fs::path& path, const std::string& what) {
  throw DataError("tokenizer " + path.string() + ": " + what);
}

std::string read_text(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) bad(path, "does not exist");
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "cannot be opened");
  std::stringstream s;
  s << in.rdbuf();
  if (in.bad()) bad(path, "cannot be read");
  return s.str();
}

json parse_json(const fs::path& path) {
  try {
    return json::parse(read_text(path));
  } catch (const json::parse_error& e) {
    bad(path, std::string("is not JSON: ") + e.what());
  }
}

std::vector<std::pair<std::string, int32_t>> read_vocab(const fs::path& path, const json& vocab) {
  if (!vocab.is_object()) bad(path, "the vocabulary is not an object of token: id");
  std::vector<std::pair<std::string, int32_t>> out;
  out.reserve(vocab.size());
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer()) bad(path, "the id of token '" + text + "' is not an integer");
    out.emplace_back(text, id.get<int32_t>());
  }
  return out;
}

// "a b" (the text holds exactly one space) as (a, b).
std::pair<std::string, std::string> merge_of_line(const fs::path& path, const std::string& line, size_t rank) {
  const size_t space = line.find(' ');
  if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
    bad(path, "merge " + std::to_string(rank) + " '" + line + "' is not two tokens separated by one space");
  return {line.substr(0, space), line.substr(space + 1)};
}

// A component that must be absent (null) or of one of the given types.
void require_type(const fs::path& path, const json& root, const char* key, std::initializer_list<const char*> types) {
  if (!root.contains(key) || root[key].is_null()) return;
  const json& part = root[key];
  const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                               ? part["type"].get<std::string>()
                               : "?";
  for (const char* t : types)
    if (type == t) return;
  bad(path, std::string(key) + " '" + type + "' is not supported (meshtrain reads byte-level BPE: " + key +
                (types.size() ? " ByteLevel or none)" : " none)"));
}

bool flag(const json& object, const char* key, bool fallback) {
  return object.contains(key) && object[key].is_boolean() ? object[key].get<bool>() : fallback;
}

BpeTokenizer from_tokenizer_json(const fs::path& path, const json& root) {
  if (!root.contains("model") || !root["model"].is_object()) bad(path, "has no model");
  const json& model = root["model"];
  const std::string type = model.value("type", std::string("?"));
  if (type != "BPE") bad(path, "model type '" + type + "' is not supported (meshtrain reads BPE)");
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() > 0)
    bad(path, "BPE dropout is set: encoding would be random");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(affix) && model[affix].is_string() && !model[affix].get<std::string>().empty())
      bad(path, std::string(affix) + " is set: that is not byte-level BPE");
  if (flag(model, "byte_fallback", false)) bad(path, "byte_fallback is set: that is not byte-level BPE");
  require_type(path, root, "normalizer", {});
  require_type(path, root, "post_processor", {"ByteLevel"});
  require_type(path, root, "decoder", {"ByteLevel"});
  if (!root.contains("pre_tokenizer") || !root["pre_tokenizer"].is_object())
    bad(path, "has no pre_tokenizer (meshtrain reads byte-level BPE: pre_tokenizer ByteLevel)");
  const json& pre = root["pre_tokenizer"];
  if (pre.value("type", std::string("?")) != "ByteLevel")
    bad(path, "pre_tokenizer '" + pre.value("type", std::string("?")) +
                  "' is not supported (meshtrain reads pre_tokenizer ByteLevel, GPT-2's regex)");

  if (!model.contains("vocab")) bad(path, "model has no vocab");
  const auto vocab = read_vocab(path, model["vocab"]);
  std::vector<std::pair<std::string, std::string>> merges;
  if (model.contains("merges")) {
    const json& list = model["merges"];
    if (!list.is_array()) bad(path, "model merges are not a list");
    merges.reserve(list.size());
    for (size_t rank = 0; rank < list.size(); ++rank) {
      const json& m = list[rank];
      if (m.is_string())
        merges.push_back(merge_of_line(path, m.get<std::string>(), rank));
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      else
        bad(path, "merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  BpeOptions options;
  options.ignore_merges = flag(model, "ignore_merges", false);
  options.fuse_unk = flag(model, "fuse_unk", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const std::string unk = model["unk_token"].get<std::string>();
    const auto it = std::find_if(vocab.begin(), vocab.end(), [&](const auto& v) { return v.first == unk; });
    if (it == vocab.end()) bad(path, "the unknown token '" + unk + "' is not in the vocabulary");
    options.unk_id = it->second;
  }

  std::vector<AddedToken> added;
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& t : root["added_tokens"]) {
      if (!t.is_object() || !t.contains("content") || !t.contains("id")) bad(path, "an added token lacks content or id");
      AddedToken a{.content = t["content"].get<std::string>(), .id = t["id"].get<int32_t>(),
                   .special = flag(t, "special", false), .lstrip = flag(t, "lstrip", false),
                   .rstrip = flag(t, "rstrip", false)};
      if (flag(t, "single_word", false)) bad(path, "added token '" + a.content + "' is single_word: not supported");
      added.push_back(std::move(a));
    }
  }
  try {
    return BpeTokenizer(BpeModel(vocab, merges, options), std::move(added),
                        {.add_prefix_space = flag(pre, "add_prefix_space", false),
                         .use_regex = flag(pre, "use_regex", true)});
  } catch (const DataError& e) {
    bad(path, e.what());
  }
}

BpeTokenizer from_vocab_and_merges(const fs::path& vocab_path, const json& vocab_json, const fs::path& merges_path) {
  const auto vocab = read_vocab(vocab_path, vocab_json);
  std::istringstream text(read_text(merges_path));
  std::vector<std::pair<std::string, std::string>> merges;
  std::string line;
  for (size_t n = 0; std::getline(text, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (n == 0 && line.starts_with("#version")) continue;
    if (line.empty()) continue;
    merges.push_back(merge_of_line(merges_path, line, merges.size()));
  }
  try {
    return BpeTokenizer(BpeModel(vocab, merges), {}, {.add_prefix_space = false, .use_regex = true});
  } catch (const DataError& e) {
    bad(vocab_path, e.what());
  }
}

}  // namespace

BpeTokenizer load_tokenizer(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "tokenizer.json")) return load_tokenizer(path / "tokenizer.json");
    if (fs::exists(path / "vocab.json")) return load_tokenizer(path / "vocab.json");
    bad(path, "is a directory with neither tokenizer.json nor vocab.json");
  }
  const json root = parse_json(path);
  if (root.is_object() && root.contains("model") && root["model"].is_object()) return from_tokenizer_json(path, root);
  // A vocab.json: an object of token: id.
  const fs::path merges = path.parent_path() / "merges.txt";
  if (!root.is_object()) bad(path, "is neither a tokenizer.json nor a vocab.json");
  if (!fs::exists(merges, ec))
    bad(path, "reads as GPT-2's vocab.json, but " + merges.string() + " (its merges) does not exist");
  return from_vocab_and_merges(path, root, merges);
}

std::string tokenizer_json(const TokenizerSpec& spec) {
  using ojson = nlohmann::ordered_json;
  // As `tokenizers` writes a ByteLevelBPETokenizer, so both read it alike.
  const auto byte_level = [&](bool add_prefix_space, bool trim_offsets) {
    return ojson{{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", trim_offsets},
                 {"use_regex", true}};
  };
  ojson added = ojson::array();
  for (const AddedToken& t : spec.added)
    added.push_back({{"id", t.id}, {"content", t.content}, {"single_word", false}, {"lstrip", t.lstrip},
                     {"rstrip", t.rstrip}, {"normalized", false}, {"special", t.special}});
  ojson vocab = ojson::object();
  for (size_t id = 0; id < spec.vocab.size(); ++id) vocab[spec.vocab[id]] = id;
  ojson merges = ojson::array();
  for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
  const ojson root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level(spec.add_prefix_space, true)},
      {"post_processor", byte_level(true, false)},
      {"decoder", byte_level(true, true)},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}},
  };
  return root.dump(2) + "\n";
}

void save_tokenizer_json(const fs::path& path, const TokenizerSpec& spec) {
  const std::string text = tokenizer_json(spec);
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) throw IoError("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw IoError("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
}

}  // namespace meshtrain::bpe
