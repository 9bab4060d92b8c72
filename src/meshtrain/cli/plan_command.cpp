// `meshtrain plan`: does the model fit, which strategy, how long. Three forms:
//   meshtrain plan [PLAN.toml] [--section.key=value ...]   the analytic planner (plan/)
//   meshtrain plan --measure [...]                         the same on a profile measured here
//   meshtrain plan --config JOB.toml                       a runnable job's memory and step time here
// and --emit-config FILE, with the first two or with --config: the
// recommendation as a job config for `meshtrain run` (plan_job_config.hpp).
#include <cstdio>
#include <fstream>
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/machine_profile.hpp"
#include "meshtrain/cli/plan_hosts.hpp"
#include "meshtrain/cli/plan_job_config.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/plan/hardware.hpp"
#include "meshtrain/plan/plan_chart.hpp"
#include "meshtrain/plan/plan_keys.hpp"
#include "meshtrain/plan/plan_report.hpp"
#include "meshtrain/train/config/config_schema.hpp"
#include "meshtrain/train/forecast/job_forecast.hpp"

namespace meshtrain::cli {
namespace {

struct PlanArgs {
  std::string file;
  std::string job_config;
  std::string svg;
  std::string emit_config;
  bool force = false;
  bool json = false;
  bool list = false;
  bool measure = false;
};

void print_profiles() {
  std::printf("devices (hardware.device):\n");
  for (const plan::DeviceProfile& d : plan::device_profiles())
    std::printf("  %-10s %6.1f GB  %7.1f TFLOP/s 16-bit  %6.1f TFLOP/s fp32  %d per node, %s / %s\n", d.name.c_str(),
                d.memory_bytes / 1e9, d.peak_flops_16bit / 1e12, d.peak_flops_fp32 / 1e12, d.devices_per_node,
                d.intra_link.c_str(), d.inter_link.c_str());
  std::printf("links (hardware.intra_link, hardware.inter_link):\n");
  for (const plan::LinkProfile& l : plan::link_profiles())
    std::printf("  %-16s %7.1f GB/s per %s and direction, %4.0f us\n", l.name.c_str(), l.bandwidth_Bps / 1e9,
                l.per_node ? "node" : "device", l.latency_s * 1e6);
  std::printf("sources: docs/planner.md\n");
}

// The recommendation written as a job config, and how to run it.
void emit_config(const plan::Plan& result, const PlanArgs& args, const JobConfig* base) {
  const EmittedJob job = job_from_plan(result, base);
  write_file_atomically(args.emit_config, emitted_config_text(job, args.emit_config));
  const ParallelSection& par = job.config.parallel;
  std::fprintf(stderr, "wrote %s: %s, %lld worker%s, %lld samples per worker in %lld micro-batch%s%s%s\n",
               args.emit_config.c_str(), job.strategy.c_str(), (long long)par.workers, par.workers == 1 ? "" : "s",
               (long long)job.config.training.batch_size, (long long)par.micro_batches,
               par.micro_batches == 1 ? "" : "es", base ? ", the rest as in " : "",
               base ? args.job_config.c_str() : "");
  for (const std::string& note : job.notes) std::fprintf(stderr, "  note: %s\n", note.c_str());
  std::fprintf(stderr, "run it:      meshtrain run %s\nforecast it: meshtrain plan --config %s\n",
               args.emit_config.c_str(), args.emit_config.c_str());
}

// The analytic planner. With a job (--config with --emit-config), the job
// gives the model, batch and optimizer; a plan file, or this machine
// measured (the default then), the hardware.
int run_analytic(const PlanArgs& args, const std::vector<std::string>& plan_flags, const JobConfig* job) {
  if (!job && args.file.empty() && plan_flags.empty() && !args.measure)
    throw ConfigError("nothing to plan: give a plan file, --section.key=value flags or --config JOB.toml "
                      "(meshtrain plan --help lists the keys; examples/plan-vision-1b.toml is one)");
  plan::PlanValues values;
  if (args.measure || (job && args.file.empty())) {
    const MachineProfile measured = measure_machine(stderr);
    add_machine_profile(measured, values);
  }
  if (!args.file.empty()) plan::read_plan_file(args.file, values);
  plan::read_plan_flags(plan_flags, values);
  if (job) add_job_to_plan(*job, args.job_config, values);
  const plan::Plan result = plan::make_plan(plan::plan_input_from(values));
  if (!args.svg.empty()) {
    std::ofstream f(args.svg);
    f << plan::render_plan_svg(result);
    if (!f) throw IoError(args.svg + ": cannot write");
    std::fprintf(stderr, "wrote %s\n", args.svg.c_str());
  }
  if (args.json)
    std::printf("%s\n", plan::plan_to_json(result).dump(2).c_str());
  else
    std::fputs(plan::format_plan(result).c_str(), stdout);
  std::fflush(stdout);
  if (!args.emit_config.empty()) emit_config(result, args, job);
  return 0;
}

int run_job_forecast(const PlanArgs& args, std::vector<std::string> flags) {
  const HostFlags given = take_host_flags(flags);
  JobConfig config = load_job_config(args.job_config, flags);
  const OpenedDevice opened = open_training_device(config.training);  // as `meshtrain run` would, first
  const HostLayout hosts = with_device_links(given, opened);
  const JobForecast forecast = forecast_job(
      config, hosts, [](comm::TransportKind link) { return measure_link(link, stderr); }, opened, stderr);
  if (args.json)
    std::printf("%s\n", job_forecast_to_json(forecast).dump(2).c_str());
  else
    std::fputs(format_job_forecast(forecast).c_str(), stdout);
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Does the model fit, which strategy, how long: per-device memory, communication and time to train for "
              "every strategy, and the one to use");
  sub->add_option("file", args->file, "a plan file (TOML with the keys below); --key=value flags override it");
  sub->add_option("--config", args->job_config,
                  "a meshtrain job config: predict its per-rank peak memory and step time on this machine "
                  "(a short probe of its model plus measured communication; on several such hosts with "
                  "--hardware.nodes=H and their network, --hardware.inter_gb_per_s or --hardware.inter_link; "
                  "workers on GPUs on their family's NVLink or PCIe, or --hardware.intra_link); "
                  "with --emit-config, plan for its "
                  "model and batch instead (hardware from the plan file, else --measure) and start from it");
  sub->add_flag("--json", args->json, "print JSON instead of a table");
  sub->add_option("--svg", args->svg, "also draw the plan (memory and step time per strategy) into this SVG file");
  sub->add_flag("--measure", args->measure,
                "measure this machine (GEMM and shared-memory all-reduce) and plan for it as the device");
  sub->add_flag("--list", args->list, "list the built-in device and link profiles");
  CLI::Option* emit = sub->add_option(
      "--emit-config", args->emit_config,
      "write the recommended layout as a job config for `meshtrain run` (or train): [parallel] data, all_reduce, "
      "workers, tensor, pipeline, expert, zero_stage, micro_batches, training.batch_size and, as the plan assumed "
      "them, training.precision and training.recompute from the plan; with "
      "--config the job's other keys as they are, else the plan's model and the default data. Refuses to "
      "overwrite an existing file");
  sub->add_flag("--force", args->force, "with --emit-config: overwrite the file if it exists")->needs(emit);
  sub->allow_extras();
  sub->footer("Keys (in a plan file as [section] key = value, or as --section.key=value):\n" +
              plan::plan_keys_reference() +
              "\nExample: meshtrain plan --model.params=1e9 --hardware.device=a100-80gb --training.global_batch=256 "
              "--time.single_device_days=10 --time.target_days=2\n"
              "Plan to run: meshtrain plan PLAN.toml --emit-config job.toml && meshtrain run job.toml\n"
              "             meshtrain plan --config JOB.toml [PLAN.toml] --emit-config job.toml (JOB.toml's model on "
              "PLAN.toml's hardware, or this machine's)");
  commands.add(sub, [args, sub] {
    if (args->list) {
      print_profiles();
      return 0;
    }
    const std::vector<std::string> flags = sub->remaining();
    if (!args->emit_config.empty()) check_may_write(args->emit_config, args->force);
    if (args->job_config.empty()) return run_analytic(*args, flags, nullptr);
    if (args->emit_config.empty()) return run_job_forecast(*args, flags);
    // Flags override the job, as with --config alone.
    JobConfig job = load_job_config(args->job_config, flags);
    return run_analytic(*args, {}, &job);
  });
}

}  // namespace meshtrain::cli
