#include "meshtrain/train/ps/ps_server.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "meshtrain/checkpoint/checkpoint_dir.hpp"
#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/core/threads.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/optim/factory.hpp"
#include "meshtrain/optim/schedule.hpp"
#include "meshtrain/parallel/parameter_server/server.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/engine/model_factory.hpp"
#include "meshtrain/train/loop/evaluator.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"
#include "meshtrain/train/ps/ps_job.hpp"
#include "meshtrain/train/report/metrics_log.hpp"

namespace meshtrain {
namespace {

namespace ps = parallel::ps;
namespace fs = std::filesystem;

nlohmann::json staleness_json(const ps::StalenessStats& s) {
  // The histogram without its empty tail.
  std::vector<int64_t> hist = s.histogram;
  while (!hist.empty() && hist.back() == 0) hist.pop_back();
  return {{"pushes", s.pushes}, {"staleness_mean", s.mean()}, {"staleness_max", s.max},
          {"staleness_histogram", hist}};
}

// Server 0: the gathered state into a model and optimizer of the job's
// shape, saved through the trainer's checkpoint code.
std::string save_final(const CheckpointSettings& checkpoints, const OptimizerConfig& optimizer_config,
                       const ps::FinalState& f, Model& model) {
  ParamStore& store = model.store();
  std::memcpy(store.params().data(), f.params.data(), store.flat_size() * sizeof(float));
  auto optimizer = make_optimizer(optimizer_config, store);
  for (auto& [name, buf] : optimizer->state_buffers()) {
    auto it = std::find_if(f.state.begin(), f.state.end(), [&](const auto& s) { return s.first == name; });
    if (it == f.state.end()) throw Error("parameter server: no final '" + name + "' state gathered");
    std::memcpy(buf->raw(), it->second.data(), store.flat_size() * sizeof(float));
  }
  optimizer->set_steps_taken(f.step);
  // The data position is per worker here; a checkpoint holds one, so none.
  return save_train_checkpoint(checkpoints, TrainState{.step = f.step, .data = {}, .skipped_steps = 0, .spike_window = {}}, model, *optimizer);
}

// Each server checkpoints its own shard (parameters and optimizer state as
// "param.<tensor>" and "<state>.<tensor>", step in the metadata) into
// <checkpoint.dir>/server-<j>/step_*: one writer per directory, so the usual
// atomic commit needs no coordination between servers. A restarted server
// continues from the newest step all servers have complete.
constexpr const char* kShardFile = "shard.safetensors";
constexpr const char* kParamPrefix = "param.";  // then "<state>." for each optimizer state buffer

std::string server_checkpoint_dir(const std::string& root, int index) {
  return root + "/server-" + std::to_string(index);
}

void save_server_shard(const std::string& dir, int64_t step, int64_t keep, const ParamStore& shard,
                       Optimizer& optimizer) {
  auto writer = checkpoint::CheckpointWriter::begin(dir, step);
  auto entries = checkpoint::view_tensors(shard, shard.params().data(), kParamPrefix);
  for (auto& [name, buffer] : optimizer.state_buffers()) {
    auto views = checkpoint::view_tensors(shard, buffer->raw(), name + ".");
    entries.insert(entries.end(), views.begin(), views.end());
  }
  checkpoint::write_safetensors(writer.file(kShardFile), entries,
                                {{"step", std::to_string(step)},
                                 {"optimizer", optimizer.name()},
                                 {"optimizer_steps", std::to_string(optimizer.steps_taken())}});
  writer.commit();
  checkpoint::prune(dir, static_cast<size_t>(keep));
}

// The newest step that every server has a complete checkpoint of (so that
// the shards resume together; `checkpoint.keep` > 1 leaves older common
// ones), loaded into this server's `shard` and `optimizer`; 0 when there is
// none. A checkpoint of this server's that fails its checksums is skipped.
int64_t restore_server_shard(const std::string& root, int index, int num_servers, ParamStore& shard,
                             Optimizer& optimizer, std::FILE* out) {
  std::set<int64_t> common;
  for (int j = 0; j < num_servers; ++j) {
    std::set<int64_t> steps;
    for (const auto& c : checkpoint::list_complete(server_checkpoint_dir(root, j))) steps.insert(c.step);
    if (j == 0) {
      common = std::move(steps);
    } else {
      std::erase_if(common, [&](int64_t s) { return !steps.count(s); });
    }
  }
  const fs::path own = server_checkpoint_dir(root, index);
  for (auto it = common.rbegin(); it != common.rend(); ++it) {
    const fs::path dir = own / checkpoint::step_dir_name(*it);
    try {
      checkpoint::verify_checkpoint(dir);
    } catch (const CheckpointError& e) {
      std::fprintf(out, "ps-server %d: warning: skipping checkpoint: %s\n", index, e.what());
      continue;
    }
    checkpoint::SafetensorsReader reader(dir / kShardFile);
    const auto& meta = reader.metadata();
    auto field = [&](const char* key) {
      auto f = meta.find(key);
      if (f == meta.end()) throw CheckpointError(reader.path().string() + ": metadata lacks '" + key + "'");
      return f->second;
    };
    if (field("optimizer") != optimizer.name())
      throw CheckpointError(reader.path().string() + ": written with optimizer '" + field("optimizer") +
                            "', not '" + optimizer.name() + "'");
    checkpoint::check_view_tensors(reader, shard, kParamPrefix);
    for (auto& [name, buffer] : optimizer.state_buffers()) checkpoint::check_view_tensors(reader, shard, name + ".");
    checkpoint::read_view_tensors(reader, shard, shard.params().data(), kParamPrefix);
    for (auto& [name, buffer] : optimizer.state_buffers())
      checkpoint::read_view_tensors(reader, shard, buffer->raw(), name + ".");
    optimizer.set_steps_taken(std::stoll(field("optimizer_steps")));
    std::fprintf(out, "ps-server %d: resuming from step %lld (%s)\n", index, (long long)*it, dir.c_str());
    std::fflush(out);
    return *it;
  }
  return 0;
}

// The server's part of the job: the state it keeps, its reports on `out` and
// in `metrics`, and its checkpoints under checkpoints.root.
ps::ServerOptions server_options(const JobConfig& config, const PsJob& job, const CheckpointSettings& checkpoints,
                                 MetricsLog& metrics, std::FILE* out) {
  const comm::LaunchEnv& env = job.env;
  const int index = env.role_index;
  const int64_t steps = config.training.steps;
  ps::ServerOptions o;
  o.state.index = index;
  o.state.num_workers = env.num_workers();
  o.state.total_steps = steps;
  o.state.max_staleness = config.parallel.max_staleness;
  o.state.optimizer = to_optimizer_config(config.optimizer);
  o.state.schedule = to_schedule_config(config);
  // Every push is one worker's batch: the batch the lr is scaled for.
  o.state.base_lr = scaled_base_lr(config, config.training.batch_size);
  o.state.report_every = config.training.log_every;
  o.state.on_report = [&metrics, out, index, steps](const ps::ServerReport& r) {
    nlohmann::json rec = staleness_json(r.window);
    rec["step"] = r.step;
    rec["lr"] = r.lr;
    rec["live_workers"] = r.live_workers;
    metrics.write(rec);
    std::fprintf(out, "ps-server %d: step %lld/%lld | lr %.3g | %d workers | staleness mean %.2f max %lld\n", index,
                 (long long)r.step, (long long)steps, r.lr, r.live_workers, r.window.mean(), (long long)r.window.max);
    std::fflush(out);
  };
  o.state.checkpoint_every = checkpoints.every;
  o.state.on_checkpoint = [&checkpoints, index](int64_t step, const ParamStore& shard, Optimizer& optimizer) {
    save_server_shard(server_checkpoint_dir(checkpoints.root, index), step, checkpoints.keep, shard, optimizer);
  };
  o.state.restore = [&checkpoints, index, servers = env.num_servers, out](ParamStore& shard, Optimizer& optimizer) {
    return restore_server_shard(checkpoints.root, index, servers, shard, optimizer, out);
  };
  o.num_servers = env.num_servers;
  o.servers = job.servers;
  o.world_size = env.world_size;
  o.token = env.token;
  o.job_id = env.job_id;
  o.timeout = job.timeout;
  o.drain = std::min(job.timeout, std::chrono::milliseconds(30000));
  return o;
}

// The server's summary record and lines: staleness, pushes and joins per worker.
nlohmann::json report_result(const ps::ServerResult& result, int index, std::FILE* out) {
  nlohmann::json rec = staleness_json(result.staleness);
  rec["event"] = "summary";
  rec["step"] = result.step;
  nlohmann::json workers = nlohmann::json::array();
  for (size_t r = 0; r < result.workers.size(); ++r)
    workers.push_back({{"rank", r}, {"pushes", result.workers[r].pushes}, {"clock", result.workers[r].clock},
                       {"joins", result.workers[r].joins}});
  rec["workers"] = workers;
  std::fprintf(out, "ps-server %d: done at step %lld: %lld pushes, staleness mean %.2f max %lld\n", index,
               (long long)result.step, (long long)result.staleness.pushes, result.staleness.mean(),
               (long long)result.staleness.max);
  for (size_t r = 0; r < result.workers.size(); ++r)
    std::fprintf(out, "ps-server %d:   worker rank %zu: %lld pushes, %lld joins\n", index, r,
                 (long long)result.workers[r].pushes, (long long)result.workers[r].joins);
  return rec;
}

}  // namespace

PsServerSummary run_parameter_server(const JobConfig& config, std::FILE* out) {
  const PsJob job = read_ps_job(config.parallel, "server");
  const int index = job.env.role_index;
  const auto& tc = config.training;
  // The host's cores shared by every rank on it, workers too (core/threads.hpp).
  use_threads(threads_for(tc.threads, job.env.local_world_size));
  const CheckpointSettings checkpoints = to_checkpoint_settings(config);

  // The same initial parameters on every server: the trainer's seed and init.
  std::unique_ptr<Model> model = make_model(config.model);
  Rng init_rng(static_cast<uint64_t>(tc.seed));
  model->init_parameters(init_rng);
  // Server 0 evaluates and checkpoints at the end: fail on bad data or an
  // unwritable directory now, not after training.
  std::optional<DataLoader> loader;
  if (index == 0) {
    loader.emplace(job_data_loader(config, 0, 1));
    std::error_code ec;
    std::filesystem::create_directories(checkpoints.root, ec);
    if (ec) throw IoError("checkpoint.dir: cannot create '" + checkpoints.root + "': " + ec.message());
  }
  MetricsLog metrics(tc.out_dir + "/server-" + std::to_string(index) + ".jsonl", -1, job.env.rank);
  ps::Server server(model->store(), server_options(config, job, checkpoints, metrics, out));
  const ps::ServerResult result = server.serve();

  PsServerSummary summary{.step = result.step, .staleness_mean = result.staleness.mean(),
                          .staleness_max = result.staleness.max};
  nlohmann::json rec = report_result(result, index, out);
  if (result.final_state) {
    const std::string path =
        save_final(checkpoints, to_optimizer_config(config.optimizer), *result.final_state, *model);
    std::fprintf(out, "ps-server 0: checkpoint %s\n", path.c_str());
    Batch scratch;
    EvalResult ev = evaluate(*model, *loader, tc.eval_batches, scratch);
    summary.val_loss = ev.loss;
    rec["val_loss"] = ev.loss;
    rec["val_accuracy"] = ev.accuracy;
    std::fprintf(out, "ps-server 0: final val_loss %.4f val_accuracy %.4f\n", ev.loss, ev.accuracy);
  }
  metrics.write(rec);
  std::fflush(out);
  return summary;
}

}  // namespace meshtrain
