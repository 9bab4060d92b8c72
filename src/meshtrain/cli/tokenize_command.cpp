// `meshtrain tokenize --tokenizer FILE [--format nanogpt|llmc] [--val-fraction F] [--val-out FILE]
//  [--threads N] IN.txt OUT.bin`: a text file through a byte-level BPE
// tokenizer into the token files data.kind = "tokens" trains on.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/data/bpe/tokenizer_json.hpp"
#include "meshtrain/data/text_dataset.hpp"
#include "meshtrain/data/tokens/token_file.hpp"
#include "meshtrain/train/report/progress.hpp"

namespace meshtrain::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string format = "nanogpt";
  double val_fraction = 0;
  std::string val_out;
  int threads = 0;
  std::string in, out;
};

// OUT.bin -> OUT_val.bin
std::string default_val_path(const std::string& out) {
  const std::filesystem::path p(out);
  return (p.parent_path() / (p.stem().string() + "_val" + p.extension().string())).string();
}

// The bar: on a terminal, or where a supervisor forwards it to one.
bool stderr_interactive() {
  const char* bar = std::getenv("MESHTRAIN_PROGRESS_BAR");
  return isatty(fileno(stderr)) || (bar && std::string(bar) == "1");
}

int run_tokenize(const TokenizeArgs& a) {
  const TokenFileFormat format = *parse_enum<TokenFileFormat>(a.format);
  const bpe::BpeTokenizer tokenizer = bpe::load_tokenizer(a.tokenizer);
  if (tokenizer.vocab_size() > kTokenFileIdLimit)
    throw ConfigError("--tokenizer " + a.tokenizer + ": its vocabulary of " + std::to_string(tokenizer.vocab_size()) +
                      " ids does not fit the token files' uint16 (at most 65536)");
  const std::vector<unsigned char> bytes = read_file_bytes(a.in);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());

  Progress progress(stderr, stderr_interactive());
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer.encode(text, a.threads, [&](size_t done, size_t total) {
    progress.fraction(total ? static_cast<double>(done) / static_cast<double>(total) : 1.0,
                      "tokenizing " + a.in + ": " + std::to_string(done >> 20) + " of " +
                          std::to_string(total >> 20) + " MiB");
  });
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const auto n = static_cast<int64_t>(ids.size());
  const auto val = static_cast<int64_t>(std::llround(static_cast<double>(n) * a.val_fraction));
  const std::span<const int32_t> all(ids);
  write_token_file(a.out, all.first(static_cast<size_t>(n - val)), format);
  std::printf("%s: %zu bytes -> %lld tokens (%.2f bytes per token) in %.2f s (%.1f MB/s)\n", a.in.c_str(),
              bytes.size(), (long long)n, n ? static_cast<double>(bytes.size()) / static_cast<double>(n) : 0.0,
              seconds, seconds > 0 ? static_cast<double>(bytes.size()) / seconds / 1e6 : 0.0);
  std::printf("wrote %s (%s, %lld tokens)\n", a.out.c_str(), a.format.c_str(), (long long)(n - val));
  if (a.val_fraction > 0) {
    const std::string val_path = a.val_out.empty() ? default_val_path(a.out) : a.val_out;
    write_token_file(val_path, all.subspan(static_cast<size_t>(n - val)), format);
    std::printf("wrote %s (%s, %lld tokens: the last %g)\n", val_path.c_str(), a.format.c_str(), (long long)val,
                a.val_fraction);
  }
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Encode a text file with a byte-level BPE tokenizer into a token file (data.kind = \"tokens\")");
  sub->add_option("--tokenizer", args->tokenizer,
                  "Hugging Face tokenizer.json (BPE, ByteLevel pre-tokenizer), GPT-2's vocab.json with merges.txt "
                  "beside it, or a directory holding either")
      ->required();
  sub->add_option("--format", args->format,
                  "nanogpt: raw little-endian uint16; llmc: llm.c's 1024-byte header (magic 20240520, version 1, "
                  "count), then uint16")
      ->check(CLI::IsMember(enum_name_list<TokenFileFormat>()));
  sub->add_option("--val-fraction", args->val_fraction,
                  "write the last fraction of the tokens to a validation file instead (0: none)")
      ->check(CLI::Range(0.0, 0.5));
  sub->add_option("--val-out", args->val_out, "the validation file; default: OUT with _val before its extension");
  sub->add_option("--threads", args->threads, "threads; 0: the cores")->check(CLI::Range(0, 1024));
  sub->add_option("in", args->in, "the text file (UTF-8; other bytes are kept as bytes)")->required();
  sub->add_option("out", args->out, "the token file to write (replaced atomically)")->required();
  commands.add(sub, [args] {
    if (!args->val_out.empty() && args->val_fraction == 0)
      throw ConfigError("--val-out: set --val-fraction too (the share of the tokens it gets)");
    return run_tokenize(*args);
  });
}

}  // namespace meshtrain::cli
