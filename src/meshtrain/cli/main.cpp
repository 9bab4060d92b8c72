// The meshtrain command: parses the subcommand and hands over to it. Only
// this file turns an error into an exit code.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"meshtrain: trains neural networks across processes and machines"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "meshtrain 0.1.0");
  meshtrain::cli::CommandSet commands;
  meshtrain::cli::add_train_command(app, commands);
  meshtrain::cli::add_eval_command(app, commands);
  meshtrain::cli::add_generate_command(app, commands);
  meshtrain::cli::add_launch_command(app, commands);
  meshtrain::cli::add_reducer_command(app, commands);
  meshtrain::cli::add_ps_server_command(app, commands);
  meshtrain::cli::add_bench_command(app, commands);
  meshtrain::cli::add_plot_command(app, commands);
  meshtrain::cli::add_run_command(app, commands);
  meshtrain::cli::add_submit_command(app, commands);
  meshtrain::cli::add_evaluator_command(app, commands);
  meshtrain::cli::add_consolidate_command(app, commands);
  meshtrain::cli::add_plan_command(app, commands);
  meshtrain::cli::add_tokenize_command(app, commands);
  meshtrain::cli::add_tokenizer_train_command(app, commands);
  meshtrain::cli::add_why_hung_command(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return commands.run_selected();
  } catch (const meshtrain::ConfigError& e) {
    std::fprintf(stderr, "meshtrain: error: %s\n", e.what());
    return meshtrain::kExitBadInput;
  } catch (const meshtrain::DeviceError& e) {
    std::fprintf(stderr, "meshtrain: error: %s\n", e.what());
    return meshtrain::kExitBadInput;
  } catch (const meshtrain::DataError& e) {
    std::fprintf(stderr, "meshtrain: error: %s\n", e.what());
    return meshtrain::kExitBadInput;
  } catch (const meshtrain::DivergedError& e) {
    std::fprintf(stderr, "meshtrain: error: %s\n", e.what());
    return meshtrain::kExitDiverged;
  } catch (const meshtrain::Error& e) {
    std::fprintf(stderr, "meshtrain: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meshtrain: internal error: %s\n", e.what());
    return 2;
  }
}
