// `meshtrain tokenizer-train --vocab-size N [--min-frequency K] [--special-token S]... [--threads N]
//  CORPUS OUT`: learns a byte-level BPE (data/bpe/bpe_trainer.hpp) and saves
// it as a tokenizer.json that Hugging Face's `tokenizers` loads.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/data/bpe/bpe_trainer.hpp"
#include "meshtrain/data/text_dataset.hpp"
#include "meshtrain/train/report/progress.hpp"

namespace meshtrain::cli {
namespace {

struct TokenizerTrainArgs {
  int64_t vocab_size = 0;
  int64_t min_frequency = 2;
  std::vector<std::string> special_tokens;
  int threads = 0;
  std::string corpus, out;
};

int run_tokenizer_train(const TokenizerTrainArgs& a) {
  const std::vector<unsigned char> bytes = read_file_bytes(a.corpus);
  const std::string_view corpus(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const char* bar = std::getenv("MESHTRAIN_PROGRESS_BAR");
  Progress progress(stderr, isatty(fileno(stderr)) || (bar && std::string(bar) == "1"));
  const auto start = std::chrono::steady_clock::now();
  const bpe::TokenizerSpec spec = bpe::train_bpe(
      corpus,
      {.vocab_size = a.vocab_size, .min_frequency = a.min_frequency, .special_tokens = a.special_tokens,
       .threads = a.threads},
      [&](bpe::TrainPhase phase, size_t done, size_t total) {
        const double f = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
        if (phase == bpe::TrainPhase::CountWords)
          progress.fraction(f, "counting words: " + std::to_string(done >> 20) + " of " +
                                   std::to_string(total >> 20) + " MiB");
        else
          progress.fraction(f, "merges: " + std::to_string(done) + " of " + std::to_string(total));
      });
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::filesystem::path out(a.out);
  std::error_code ec;
  if (std::filesystem::is_directory(out, ec)) out /= "tokenizer.json";
  bpe::save_tokenizer_json(out, spec);
  std::printf("%s: %zu bytes -> %zu tokens (%zu special, 256 bytes, %zu merges) in %.2f s; wrote %s\n",
              a.corpus.c_str(), bytes.size(), spec.vocab.size(), spec.added.size(), spec.merges.size(), seconds,
              out.c_str());
  if (static_cast<int64_t>(spec.vocab.size()) < a.vocab_size)
    std::printf("stopped short of --vocab-size %lld: no pair occurs %lld times or more\n", (long long)a.vocab_size,
                (long long)std::max<int64_t>(1, a.min_frequency));
  return 0;
}

}  // namespace

void add_tokenizer_train_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<TokenizerTrainArgs>();
  CLI::App* sub = app.add_subcommand(
      "tokenizer-train", "Learn a byte-level BPE tokenizer (GPT-2's kind) from a text file; save its tokenizer.json");
  sub->add_option("--vocab-size", args->vocab_size,
                  "tokens in all: special tokens + 256 bytes + merges")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--min-frequency", args->min_frequency,
                  "a pair must occur this often to be merged (2, as tokenizers' ByteLevelBPETokenizer.train)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--special-token", args->special_tokens,
                  "a token such as <|endoftext|>, matched whole before pre-tokenization (ids 0, 1, ... in order); "
                  "repeatable");
  sub->add_option("--threads", args->threads, "threads counting words; 0: the cores")->check(CLI::Range(0, 1024));
  sub->footer(
      "Ties: among pairs of equal count the smallest (left id, right id) merges first; ids are the special tokens, "
      "then the bytes in the code point order of GPT-2's byte characters, then merges as made (the order of "
      "tokenizers' BpeTrainer). See docs/tokenized_data.md.");
  sub->add_option("corpus", args->corpus, "the text file to learn from, read line by line")->required();
  sub->add_option("out", args->out, "the tokenizer.json to write (a directory: OUT/tokenizer.json)")->required();
  commands.add(sub, [args] { return run_tokenizer_train(*args); });
}

}  // namespace meshtrain::cli
