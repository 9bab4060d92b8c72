// `meshtrain eval CHECKPOINT [--batches N] [--json] [--logits FILE] [--section.key=value ...]`
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/cli/commands.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/train/config/config_schema.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/loop/evaluator.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"

namespace meshtrain::cli {
namespace {

struct EvalArgs {
  std::string checkpoint;
  int64_t batches = 0;
  bool json = false;
  std::string logits;
};

// The validation batches' tokens, targets and every position's logits (a
// GPT's), so another implementation can be compared on the same inputs.
void write_validation_logits(Model& model, DataLoader& loader, int64_t batches, const std::string& path) {
  auto* gpt = dynamic_cast<Gpt*>(&model);
  if (!gpt) throw ConfigError("eval --logits: the checkpoint's model is a " + model.kind() + ", not a GPT");
  Batch batch;
  std::vector<int32_t> tokens, targets;
  std::vector<float> logits;
  int64_t rows = 0, T = 0;
  for (int64_t k = 0; k < batches; ++k) {
    loader.validation_batch(k, batch);
    T = batch.seq_len;
    for (int64_t b = 0; b < batch.batch_size; ++b, ++rows) {
      const std::span<const int32_t> row(batch.tokens.data() + b * T, static_cast<size_t>(T));
      const std::span<const float> out = gpt->sequence_logits(row);
      tokens.insert(tokens.end(), row.begin(), row.end());
      targets.insert(targets.end(), batch.targets.data() + b * T, batch.targets.data() + (b + 1) * T);
      logits.insert(logits.end(), out.begin(), out.end());
    }
  }
  const int64_t V = gpt->config().vocab_size;
  const std::vector<checkpoint::TensorEntry> entries = {
      checkpoint::tensor_entry<int32_t>("tokens", {rows, T}, tokens),
      checkpoint::tensor_entry<int32_t>("targets", {rows, T}, targets),
      checkpoint::tensor_entry<float>("logits", {rows, T, V}, logits)};
  checkpoint::write_safetensors(path, entries, {{"format", "pt"}});
}

}  // namespace

void add_eval_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand("eval", "Report validation loss and accuracy of a checkpoint");
  sub->add_option("checkpoint", args->checkpoint,
                  "a checkpoint directory (step_*), or a directory of them: the newest complete one")
      ->required();
  sub->add_option("--batches", args->batches, "validation batches (default: training.eval_batches; 0: all)");
  sub->add_flag("--json", args->json, "print one JSON object instead of a sentence");
  sub->add_option("--logits", args->logits,
                  "also write the evaluated batches' tokens, targets and logits (GPT) to this safetensors file");
  sub->allow_extras();
  sub->footer("Config keys of the checkpoint's job (e.g. --data.path=...) can be overridden as --section.key=value.");
  commands.add(sub, [args, sub] {
    CheckpointModel loaded = load_checkpoint_model(args->checkpoint, sub->remaining());
    const JobConfig& config = loaded.config;
    const std::string& path = loaded.path;
    Model& model = *loaded.model;
    DataLoader loader = job_data_loader(config, 0, 1);
    Batch scratch;
    const int64_t batches = sub->count("--batches") ? args->batches : config.training.eval_batches;
    EvalResult r = evaluate(model, loader, batches, scratch);
    if (!args->logits.empty()) write_validation_logits(model, loader, r.batches, args->logits);
    if (args->json) {
      nlohmann::json out = {{"checkpoint", path}, {"step", loaded.step}, {"val_loss", r.loss},
                            {"val_accuracy", r.accuracy}, {"predictions", r.predictions}, {"batches", r.batches}};
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("%s (step %lld): val_loss %.4f val_accuracy %.4f over %lld predictions in %lld batches\n",
                  path.c_str(), (long long)loaded.step, r.loss, r.accuracy, (long long)r.predictions,
                  (long long)r.batches);
    }
    return 0;
  });
}

}  // namespace meshtrain::cli
