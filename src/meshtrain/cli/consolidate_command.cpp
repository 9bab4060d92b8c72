// `meshtrain consolidate CHECKPOINT OUT [--format safetensors|hf] [--dtype fp32|bf16]`: the
// parameters of a checkpoint of any layout in one safetensors file under the
// model's names (Hugging Face names for GPT), or, --format hf, a Hugging
// Face GPT-2 directory (config.json + model.safetensors) that
// transformers.GPT2LMHeadModel.from_pretrained loads.
#include <cstdio>
#include <memory>

#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/cli/commands.hpp"
#include "meshtrain/train/interop/hf_gpt2.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"

namespace meshtrain::cli {
namespace {

struct ConsolidateArgs {
  std::string checkpoint;
  std::string out;
  std::string format = "safetensors";
  std::string dtype = "fp32";
};

}  // namespace

void add_consolidate_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<ConsolidateArgs>();
  CLI::App* sub = app.add_subcommand(
      "consolidate", "Write a checkpoint's parameters (whole or ZeRO-sharded) into one safetensors file");
  sub->add_option("checkpoint", args->checkpoint,
                  "a checkpoint directory (step_*), or a directory of them: the newest complete one")
      ->required();
  sub->add_option("out", args->out,
                  "the safetensors file to write, or with --format hf the directory (files replaced atomically)")
      ->required();
  sub->add_option("--format", args->format,
                  "safetensors: one file of meshtrain's tensors; hf: a Hugging Face GPT-2 directory (config.json, "
                  "model.safetensors) for transformers")
      ->check(CLI::IsMember({"safetensors", "hf"}))
      ->capture_default_str();
  sub->add_option("--dtype", args->dtype,
                  "the tensors' dtype: fp32 (the master weights as trained) or bf16 (rounded to nearest even: half "
                  "the size, for inference or a bf16 fine-tune)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  commands.add(sub, [args] {
    CheckpointModel loaded = load_checkpoint_model(args->checkpoint);
    const checkpoint::Dtype dtype = args->dtype == "bf16" ? checkpoint::Dtype::BF16 : checkpoint::Dtype::F32;
    if (args->format == "hf") {
      interop::export_hf_gpt2(loaded.config.model, loaded.model->store(), args->out, dtype);
      std::printf("%s (step %lld): %zu parameters -> Hugging Face GPT-2 in %s\n", loaded.path.c_str(),
                  (long long)loaded.step, loaded.model->store().parameter_count(), args->out.c_str());
      return 0;
    }
    checkpoint::save_params(loaded.model->store(), args->out,
                            {{"format", "pt"}, {"step", std::to_string(loaded.step)}, {"model", loaded.model->kind()}},
                            dtype);
    std::printf("%s (step %lld): %zu parameters -> %s (%s)\n", loaded.path.c_str(), (long long)loaded.step,
                loaded.model->store().parameter_count(), args->out.c_str(), args->dtype.c_str());
    return 0;
  });
}

}  // namespace meshtrain::cli
