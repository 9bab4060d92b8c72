#pragma once
// Each subcommand registers its options on the CLI11 app and a function to
// run when it is the one selected.
#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace meshtrain::cli {

class CommandSet {
 public:
  void add(CLI::App* sub, std::function<int()> run) { entries_.push_back({sub, std::move(run)}); }
  int run_selected() {
    for (auto& e : entries_)
      if (e.sub->parsed()) return e.run();
    return 1;
  }

 private:
  struct Entry {
    CLI::App* sub;
    std::function<int()> run;
  };
  std::vector<Entry> entries_;
};

void add_train_command(CLI::App& app, CommandSet& commands);
void add_eval_command(CLI::App& app, CommandSet& commands);
void add_generate_command(CLI::App& app, CommandSet& commands);
void add_launch_command(CLI::App& app, CommandSet& commands);
void add_reducer_command(CLI::App& app, CommandSet& commands);
void add_ps_server_command(CLI::App& app, CommandSet& commands);
void add_bench_command(CLI::App& app, CommandSet& commands);
// `meshtrain bench schedule`, under `bench` (bench_schedule_command.cpp).
void add_bench_schedule_command(CLI::App& bench, CommandSet& commands);
void add_plot_command(CLI::App& app, CommandSet& commands);
void add_run_command(CLI::App& app, CommandSet& commands);
void add_submit_command(CLI::App& app, CommandSet& commands);
void add_evaluator_command(CLI::App& app, CommandSet& commands);
void add_consolidate_command(CLI::App& app, CommandSet& commands);
void add_plan_command(CLI::App& app, CommandSet& commands);
void add_tokenize_command(CLI::App& app, CommandSet& commands);
void add_tokenizer_train_command(CLI::App& app, CommandSet& commands);
void add_why_hung_command(CLI::App& app, CommandSet& commands);

}  // namespace meshtrain::cli
