#pragma once
// GPT-2's pre-tokenizer: the regex that cuts text into the pieces BPE merges
// within (no merge crosses a piece), run by PCRE2 in UTF mode with Unicode
// properties (\s and \p{..} are Unicode's) and JIT-compiled where PCRE2 can.
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Pieces cover the text exactly, in order: as Hugging Face's ByteLevel
// pre-tokenizer does, text between two matches (only bytes that are not
// UTF-8 can be left there) is a piece of its own.
#include <cstddef>
#include <string_view>

#include "meshtrain/core/function_ref.hpp"

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_jit_stack_8;
struct pcre2_real_match_context_8;

namespace meshtrain::bpe {

inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class Pretokenizer {
 public:
  // What one thread matches with: PCRE2's match data and JIT stack, made
  // once and reused for every text it splits.
  class Scratch {
   public:
    explicit Scratch(const Pretokenizer& pretokenizer);
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

   private:
    friend class Pretokenizer;
    void release();
    pcre2_real_match_data_8* match_ = nullptr;
    pcre2_real_jit_stack_8* stack_ = nullptr;
    pcre2_real_match_context_8* context_ = nullptr;
  };

  // Compiles kGpt2Pattern. Error if PCRE2 refuses it.
  Pretokenizer();
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Calls piece for each piece of text, in order. Safe to call from several
  // threads at once, each with its own scratch. DataError if PCRE2 fails
  // (a resource limit).
  void split(std::string_view text, Scratch& scratch, FunctionRef<void(std::string_view)> piece) const;
  // The same with a scratch made for this call.
  void split(std::string_view text, FunctionRef<void(std::string_view)> piece) const;

  bool jit() const { return jit_; }

 private:
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace meshtrain::bpe
