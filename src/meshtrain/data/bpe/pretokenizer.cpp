#include "meshtrain/data/bpe/pretokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::bpe {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR text[256];
  pcre2_get_error_message(code, text, sizeof text);
  return reinterpret_cast<const char*>(text);
}

// JIT stack: enough for long runs of whitespace, where \s+(?!\S) backtracks.
constexpr size_t kJitStackStart = 32 * 1024, kJitStackMax = 16 * 1024 * 1024;

}  // namespace

Pretokenizer::Pretokenizer() {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UCP: \s is Unicode's white space, as in the regex engines of GPT-2
  // (Python's re on str) and Hugging Face (Oniguruma). MATCH_INVALID_UTF:
  // bytes that are not UTF-8 never match, so they end up between matches.
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern.data()), kGpt2Pattern.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!code_)
    throw Error("pre-tokenizer: PCRE2 cannot compile GPT-2's regex at offset " + std::to_string(offset) + ": " +
                pcre2_message(error));
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() { pcre2_code_free(code_); }

Pretokenizer::Scratch::Scratch(const Pretokenizer& p) {
  match_ = pcre2_match_data_create_from_pattern(p.code_, nullptr);
  if (p.jit_) {
    stack_ = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
    context_ = pcre2_match_context_create(nullptr);
    if (stack_ && context_) pcre2_jit_stack_assign(context_, nullptr, stack_);
  }
  if (!match_ || (p.jit_ && (!stack_ || !context_))) {
    release();  // a constructor that throws runs no destructor
    throw Error("pre-tokenizer: out of memory for PCRE2's match data");
  }
}

Pretokenizer::Scratch::~Scratch() { release(); }

void Pretokenizer::Scratch::release() {
  if (context_) pcre2_match_context_free(context_);
  if (stack_) pcre2_jit_stack_free(stack_);
  if (match_) pcre2_match_data_free(match_);
  context_ = nullptr, stack_ = nullptr, match_ = nullptr;
}

void Pretokenizer::split(std::string_view text, Scratch& scratch, FunctionRef<void(std::string_view)> piece) const {
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.match_);
  size_t at = 0;
  while (at < n) {
    const int rc = jit_ ? pcre2_jit_match(code_, subject, n, at, 0, scratch.match_, scratch.context_)
                        : pcre2_match(code_, subject, n, at, 0, scratch.match_, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      piece(text.substr(at));  // bytes that are not UTF-8, up to the end
      return;
    }
    if (rc < 0)
      throw DataError("pre-tokenizer: PCRE2 failed at byte " + std::to_string(at) + ": " + pcre2_message(rc));
    const size_t begin = ov[0], end = ov[1];
    if (begin > at) piece(text.substr(at, begin - at));
    if (end == begin) {  // cannot happen (every branch takes a character); never loop on it
      piece(text.substr(begin, 1));
      at = begin + 1;
      continue;
    }
    piece(text.substr(begin, end - begin));
    at = end;
  }
}

void Pretokenizer::split(std::string_view text, FunctionRef<void(std::string_view)> piece) const {
  Scratch scratch(*this);
  split(text, scratch, piece);
}

}  // namespace meshtrain::bpe
