// `meshtrain eval CHECKPOINT [--batches N] [--json] [--section.key=value ...]`
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "meshtrain/cli/commands.hpp"
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
};

}  // namespace

void add_eval_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand("eval", "Report validation loss and accuracy of a checkpoint");
  sub->add_option("checkpoint", args->checkpoint,
                  "a checkpoint directory (step_*), or a directory of them: the newest complete one")
      ->required();
  sub->add_option("--batches", args->batches, "validation batches (default: training.eval_batches; 0: all)");
  sub->add_flag("--json", args->json, "print one JSON object instead of a sentence");
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
