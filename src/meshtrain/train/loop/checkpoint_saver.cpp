#include "meshtrain/train/loop/checkpoint_saver.hpp"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include "meshtrain/checkpoint/checkpoint_dir.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/parallel/zero/shard_layout.hpp"

namespace meshtrain {
namespace fs = std::filesystem;

CheckpointSaver::CheckpointSaver(const CheckpointSettings& settings, const Model& model, Optimizer& optimizer,
                                 parallel::ZeroEngine* zero, parallel::ParallelContext& workers)
    : settings_(settings), model_(model), optimizer_(optimizer), zero_(zero), workers_(workers),
      async_(settings.async) {
  const ParamStore& store = model.store();
  if (zero) {
    zero_stage_ = zero->stage();
    segments_ = zero->layout().segments();
    params_in_shard_ = zero->stage() >= 3;
    state_in_shard_ = true;
  } else if (workers.expert_data_size() > 1) {
    // Every worker holds everything (under expert parallelism: everything
    // of its expert rank's); each saves the slices ZeRO would give it among
    // the workers that hold the same.
    segments_ = parallel::ShardLayout(store, workers.expert_data_rank(), workers.expert_data_size()).segments();
  } else {
    segments_ = {{.begin = 0, .end = store.flat_size(), .local = 0}};
  }
}

CheckpointSaver::~CheckpointSaver() {
  abandon_ = true;
  if (thread_.joinable()) thread_.join();
}

SavedShare CheckpointSaver::snapshot(bool copy) {
  auto states = optimizer_.state_buffers();
  SavedShare share{.segments = segments_, .optimizer_name = optimizer_.name(),
                   .optimizer_steps = optimizer_.steps_taken()};
  // Stage 3 keeps parameters only in the shard; otherwise they are whole.
  // Off the CPU they are the device's: always copied out (downloaded).
  const ParamStore& store = model_.store();
  const float* params = params_in_shard_ ? zero_->param_shard().data() : store.kernel_params().data();
  std::vector<checkpoint::ShardBuffer> live{{"params", params, params_in_shard_}};
  for (auto& [name, buffer] : states) live.push_back({name, buffer->raw(), state_in_shard_});
  if (!copy && store.on_host()) {
    share.buffers = std::move(live);
    return share;
  }
  size_t local = 0;
  for (const auto& s : segments_) local = std::max(local, s.local + s.size());
  copies_.resize(live.size());
  DeviceAllocator& memory = kernels::backend_for(store.device()).allocator();  // the CPU's: memcpy
  for (size_t i = 0; i < live.size(); ++i) {
    AlignedBuffer<float>& copy = copies_[i];
    if (copy.size() < local) copy = AlignedBuffer<float>(local, MemoryKind::Other);
    const checkpoint::ShardBuffer& src = live[i];
    for (const auto& s : segments_)
      memory.download(copy.data() + s.local, src.data + (src.in_shard ? s.local : s.begin), s.size() * sizeof(float));
    share.buffers.push_back({src.name, copy.data(), true});
  }
  return share;
}

std::string CheckpointSaver::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return std::exchange(committed_, "");
}

void CheckpointSaver::write(TrainState state, SavedShare share, fs::path dir,
                            std::optional<checkpoint::CheckpointWriter> writer) {
  // The data ranks holding the same store split it: under expert
  // parallelism, those with the same experts.
  const int world = workers_.expert_data_size(), tensor_ways = workers_.tensor_size(),
            stages = workers_.pipeline_size(), expert_ways = workers_.expert_size();
  if (workers_.workers() == 1) {
    write_whole_checkpoint(dir, state, settings_.config_toml, model_, share);
  } else {
    try {
      write_checkpoint_shard(dir,
                             {.rank = workers_.expert_data_rank(), .world = world,
                              .tensor_rank = workers_.tensor_rank(), .tensor_ways = tensor_ways,
                              .pipeline_rank = workers_.pipeline_rank(), .pipeline_ways = stages,
                              .expert_rank = workers_.expert_rank(), .expert_ways = expert_ways,
                              .zero_stage = zero_stage_},
                             state, settings_.config_toml, model_.store(), share);
    } catch (...) {
      // The others may still be writing their shards into this directory:
      // removing it would turn their errors into "no such file".
      if (writer) writer->abandon_in_place();
      throw;
    }
  }
  if (!writer) return;
  // The lead commits once every worker's shard has appeared (each by an
  // atomic rename, so appearing means complete).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(settings_.timeout_s);
  for (int p = 0; p < stages && workers_.workers() > 1; ++p)
  for (int e = 0; e < expert_ways; ++e)
  for (int t = 0; t < tensor_ways; ++t)
    for (int r = 0; r < world; ++r) {
      const fs::path shard = dir / checkpoint::shard_file_name(r, world, t, tensor_ways, p, stages, e, expert_ways);
      while (!fs::exists(shard)) {
        if (abandon_) return;
        if (std::chrono::steady_clock::now() > deadline)
          throw CheckpointError("checkpoint step " + std::to_string(state.step) + ": " + shard.filename().string() +
                                " did not arrive in " + dir.string() + " within parallel.timeout_s (" +
                                std::to_string(settings_.timeout_s) + " s)");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  auto info = writer->commit({.workers = workers_.workers(), .zero_stage = zero_stage_, .dp = workers_.data_size(),
                              .tp = tensor_ways, .pp = stages, .ep = expert_ways, .config = settings_.config_toml});
  checkpoint::prune(settings_.root, static_cast<size_t>(settings_.keep));
  committed_ = info.path.string();
}

std::string CheckpointSaver::save(const TrainState& state, bool last) {
  std::string previous = wait();
  const std::string& root = settings_.root;
  std::optional<checkpoint::CheckpointWriter> writer;
  int64_t writer_pid = 0;
  if (workers_.is_lead()) {
    writer.emplace(checkpoint::CheckpointWriter::begin(root, state.step));
    writer_pid = ::getpid();
  }
  writer_pid = workers_.broadcast_from_lead(writer_pid);
  fs::path dir = checkpoint::CheckpointWriter::tmp_path_for(root, state.step, writer_pid);
  const bool background = async_ && !last;
  SavedShare share = snapshot(background);
  if (!background) {
    write(state, std::move(share), std::move(dir), std::move(writer));
    return std::exchange(committed_, "");
  }
  thread_ = std::thread([this, state, share = std::move(share), dir = std::move(dir),
                         writer = std::move(writer)]() mutable {
    try {
      write(state, std::move(share), std::move(dir), std::move(writer));
    } catch (...) {
      error_ = std::current_exception();
    }
  });
  return previous;
}

}  // namespace meshtrain
