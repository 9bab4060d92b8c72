// `meshtrain consolidate CHECKPOINT OUT.safetensors`: the parameters of a
// checkpoint, whole or sharded by ZeRO over any number of workers, in one
// safetensors file under the model's names (Hugging Face names for GPT).
#include <cstdio>
#include <memory>

#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/cli/commands.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"

namespace meshtrain::cli {
namespace {

struct ConsolidateArgs {
  std::string checkpoint;
  std::string out;
};

}  // namespace

void add_consolidate_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<ConsolidateArgs>();
  CLI::App* sub = app.add_subcommand(
      "consolidate", "Write a checkpoint's parameters (whole or ZeRO-sharded) into one safetensors file");
  sub->add_option("checkpoint", args->checkpoint,
                  "a checkpoint directory (step_*), or a directory of them: the newest complete one")
      ->required();
  sub->add_option("out", args->out, "the safetensors file to write (replaced atomically if it exists)")->required();
  commands.add(sub, [args] {
    CheckpointModel loaded = load_checkpoint_model(args->checkpoint);
    checkpoint::save_params(loaded.model->store(), args->out,
                            {{"format", "pt"}, {"step", std::to_string(loaded.step)}, {"model", loaded.model->kind()}});
    std::printf("%s (step %lld): %zu parameters -> %s\n", loaded.path.c_str(), (long long)loaded.step,
                loaded.model->store().parameter_count(), args->out.c_str());
    return 0;
  });
}

}  // namespace meshtrain::cli
