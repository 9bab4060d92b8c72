// `meshtrain evaluator CONFIG.toml [--section.key=value ...]`: worker pool 3.
// Evaluates each new checkpoint of the job until the final one (see
// cluster/evaluator_pool.hpp). It runs beside the workers, so it keeps to one
// thread at lower priority; SIGTERM stops it after the checkpoint in hand.
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/launched_job_config.hpp"
#include "meshtrain/cluster/evaluator_pool.hpp"
#include "meshtrain/core/threads.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain::cli {
namespace {

constexpr int64_t kEvaluatorThreads = 1;

volatile std::sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

}  // namespace

void add_evaluator_command(CLI::App& app, CommandSet& commands) {
  auto config_path = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("evaluator", "Evaluate each new checkpoint of a running job (worker pool 3)");
  sub->add_option("config", *config_path, "the job's config (TOML)")->required();
  sub->allow_extras();
  sub->footer(
      "Appends {step, val_loss, val_accuracy, ...} per checkpoint to <training.out_dir>/eval.jsonl (and,\n"
      "with metrics.tensorboard=true, as TensorBoard scalars eval/... to <training.out_dir>/tb) and\n"
      "exits after the checkpoint of step training.steps. Overrides (--section.key=value) apply to the\n"
      "job config and to each checkpoint's config.");
  commands.add(sub, [config_path, sub] {
    const std::vector<std::string> overrides = sub->remaining();
    JobConfig config = load_launched_job_config(*config_path, overrides);
    // One thread whatever training.threads says: the evaluator runs beside
    // the job's workers, which share the cores among themselves.
    use_threads(threads_for(kEvaluatorThreads, 1));
    errno = 0;
    const int niceness = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && niceness < 10) setpriority(PRIO_PROCESS, 0, 10);
    std::signal(SIGTERM, on_stop);
    std::signal(SIGINT, on_stop);
    EvaluatorOptions options;
    options.overrides = overrides;
    options.stop = &g_stop;
    run_evaluator(config, options);
    return 0;
  });
}

}  // namespace meshtrain::cli
