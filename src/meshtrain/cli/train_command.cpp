// `meshtrain train CONFIG.toml [--section.key=value ...] [--resume] [--stop-at-step N]
//  [--memory-report] [--max-memory-per-rank MIB] [--trace FILE]`
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/launched_job_config.hpp"
#include "meshtrain/comm/nccl/environment.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/train/config/config_schema.hpp"
#include "meshtrain/train/train.hpp"

namespace meshtrain::cli {
namespace {

struct TrainArgs {
  std::string config_path;
  bool resume = false;
  int64_t stop_at_step = 0;
  bool memory_report = false;
  double max_memory_mb = 0;
  std::string trace;
};

}  // namespace

void add_train_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "Train a model in this process from a TOML job config");
  sub->add_option("config", args->config_path, "job config (TOML)")->required();
  sub->add_flag("--resume", args->resume, "continue from the newest complete checkpoint, if there is one");
  sub->add_option("--stop-at-step", args->stop_at_step,
                  "checkpoint and stop after this step; the schedule still spans training.steps")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--memory-report", args->memory_report,
                "print each kind's peak memory per rank (parameters, gradients, optimizer state, activations, "
                "communication) beside ZeRO's prediction at the end");
  sub->add_option("--max-memory-per-rank", args->max_memory_mb,
                  "per-rank memory limit in MiB (training.max_memory_mb): refuse before training if the model "
                  "state does not fit, fail a step whose peak exceeds it")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--trace", args->trace,
                  "write the last step's pipeline actions on every rank as one Chrome/Perfetto trace JSON "
                  "(metrics.trace; `meshtrain plot FILE` draws it)");
  sub->allow_extras();
  sub->footer("Any config key can be overridden as --section.key=value:\n" + job_config_reference());
  commands.add(sub, [args, sub] {
    comm::nccl::set_environment();  // before this process starts a thread
    JobConfig config = load_launched_job_config(args->config_path, sub->remaining());
    if (args->max_memory_mb > 0) config.training.max_memory_mb = args->max_memory_mb;
    if (!args->trace.empty()) config.metrics.trace = args->trace;
    TrainOptions options;
    options.memory_report = args->memory_report;
    options.resume = args->resume;
    options.stop_at_step = args->stop_at_step;
    // MESHTRAIN_PROGRESS_BAR: a supervisor (meshtrain run, launch) forwards
    // our output to a terminal and redraws the bar there.
    const char* bar = std::getenv("MESHTRAIN_PROGRESS_BAR");
    options.interactive = isatty(fileno(stdout)) || (bar && std::string(bar) == "1");
    // Preempted: the checkpoint of the last step is written; resuming goes on.
    return train(config, options).stopped_by ? kExitPreempted : 0;
  });
}

}  // namespace meshtrain::cli
