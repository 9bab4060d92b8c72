// `meshtrain generate CHECKPOINT --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]
//  [--tokenizer FILE] [--device DEV]`
#include <cstdio>
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/loop/generate.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"

namespace meshtrain::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint;
  std::string prompt;
  std::string tokenizer;
  std::string device;
  SamplingOptions sampling;
};

}  // namespace

void add_generate_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Sample text from a GPT checkpoint");
  sub->add_option("checkpoint", args->checkpoint,
                  "a checkpoint directory (step_*), or a directory of them: the newest complete one")
      ->required();
  sub->add_option("--prompt", args->prompt, "text to continue")->required();
  sub->add_option("--tokens", args->sampling.tokens, "tokens to generate (bytes for a run on text)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--temperature", args->sampling.temperature, "softmax temperature; 0 is greedy")
      ->check(CLI::Range(0.0, 100.0));
  sub->add_option("--top-k", args->sampling.top_k, "sample among the k likeliest tokens; 0: all")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--seed", args->sampling.seed, "sampling seed");
  sub->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json (or vocab.json) to encode and decode with; default: the run's data.tokenizer "
                  "(token data), or bytes (text)");
  sub->add_option("--device", args->device,
                  "where the model runs: cpu (the default, wherever it trained), cuda, cuda:N or cpu-guarded");
  commands.add(sub, [args] {
    std::vector<std::string> overrides;
    if (!args->device.empty()) overrides.push_back("--training.device=" + args->device);
    CheckpointModel loaded = load_checkpoint_model(args->checkpoint, overrides);
    auto* gpt = dynamic_cast<Gpt*>(loaded.model.get());
    if (!gpt)
      throw ConfigError(loaded.path + ": generate needs a GPT checkpoint, this one is '" +
                        enum_string(loaded.config.model.kind) + "'");
    const auto codec = make_text_codec(to_data_config(loaded.config), args->tokenizer);
    std::string text = generate_text(*gpt, *codec, args->prompt, args->sampling);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  });
}

}  // namespace meshtrain::cli
