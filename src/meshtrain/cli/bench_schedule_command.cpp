// `meshtrain bench schedule --schedule S --stages P --micro-batches M [--virtual-stages V]
//  [--costs F,B,W[,F,B,W...]] [--json]`: a pipeline schedule simulated
// offline (parallel/pipeline/validator.hpp) with the given action costs (one
// triple for every rank, or one per rank): its step length, bubble and
// micro-batches in flight per rank. With the F, B and W
// times of a traced step (bench/pipeline_bubbles.py) it predicts that
// step's bubble for schedules whose formula assumes F = B = W.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/pipeline/schedule.hpp"
#include "meshtrain/parallel/pipeline/validator.hpp"

namespace meshtrain::cli {
namespace {

struct ScheduleArgs {
  std::string schedule = "1f1b";
  int stages = 2, micro_batches = 4, virtual_stages = 1;
  std::vector<double> costs = {1.0, 1.0, 1.0};
  bool json = false;
};

}  // namespace

void add_bench_schedule_command(CLI::App& bench, CommandSet& commands) {
  namespace pp = parallel::pipeline;
  auto args = std::make_shared<ScheduleArgs>();
  CLI::App* sub = bench.add_subcommand("schedule", "Simulate a pipeline schedule: its bubble and activations in flight");
  sub->add_option("--schedule", args->schedule, "gpipe, 1f1b, interleaved or zero_bubble")
      ->check(CLI::IsMember(enum_name_list<pp::ScheduleKind>()));
  sub->add_option("--stages", args->stages, "pipeline ranks P")->check(CLI::Range(1, 1024));
  sub->add_option("--micro-batches", args->micro_batches, "micro-batches M")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--virtual-stages", args->virtual_stages, "chunks per rank V (interleaved)")->check(CLI::Range(1, 64));
  sub->add_option("--costs", args->costs,
                  "forward, backward-input and backward-weight times (any unit): one triple, or one per rank")
      ->delimiter(',');
  sub->add_flag("--json", args->json, "one JSON line");
  commands.add(sub, [args] {
    const pp::Schedule schedule = pp::make_schedule(*parse_enum<pp::ScheduleKind>(args->schedule), args->stages,
                                                    args->micro_batches, args->virtual_stages);
    const auto& c = args->costs;
    if (c.size() % 3 != 0 || (c.size() != 3 && c.size() != 3 * size_t(args->stages)))
      throw ConfigError("bench schedule: --costs takes F,B,W once or once per rank (" + std::to_string(3 * args->stages) +
                        " numbers), got " + std::to_string(c.size()));
    std::vector<pp::ActionCosts> rows;
    for (size_t i = 0; i < c.size(); i += 3) rows.push_back({c[i], c[i + 1], c[i + 2]});
    const pp::ScheduleReport r = pp::validate_schedule(schedule, rows);
    if (args->json) {
      std::printf("%s\n", nlohmann::json{{"schedule", args->schedule},
                                         {"stages", args->stages},
                                         {"micro_batches", args->micro_batches},
                                         {"virtual_stages", args->virtual_stages},
                                         {"costs", c},
                                         {"makespan", r.makespan},
                                         {"bubble", r.bubble},
                                         {"peak_in_flight", r.peak_in_flight},
                                         {"peak_weight_pending", r.peak_weight_pending}}
                              .dump()
                              .c_str());
      return 0;
    }
    std::printf("%s P=%d M=%d V=%d, costs F %.3g B %.3g W %.3g%s: step %.4g, bubble %.4f\n", args->schedule.c_str(),
                args->stages, args->micro_batches, args->virtual_stages, c[0], c[1], c[2],
                rows.size() > 1 ? " (rank 0's; one row per rank)" : "", r.makespan, r.bubble);
    for (size_t rank = 0; rank < r.peak_in_flight.size(); ++rank)
      std::printf("  rank %zu: %d micro-batch chunk(s) in flight at most, %d awaiting their weight gradient\n", rank,
                  r.peak_in_flight[rank], r.peak_weight_pending[rank]);
    return 0;
  });
}

}  // namespace meshtrain::cli
