#include "meshtrain/cluster/evaluator_pool.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "meshtrain/checkpoint/checkpoint_dir.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/loop/evaluator.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"
#include "meshtrain/train/report/tensorboard/tensorboard_log.hpp"

namespace meshtrain {
namespace {

namespace fs = std::filesystem;

// True when this process now owns `step` (no other evaluator took it).
bool claim(const fs::path& claims, int64_t step) {
  const fs::path file = claims / checkpoint::step_dir_name(step);
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  if (errno == EEXIST) return false;
  throw IoError("evaluator: cannot create " + file.string() + ": " + std::strerror(errno));
}

// One write() with O_APPEND, so lines of several evaluators never interleave.
void append_line(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("evaluator: cannot open " + path.string() + ": " + std::strerror(errno));
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    throw IoError("evaluator: cannot write " + path.string() + ": " + std::strerror(err));
}

bool stopping(const EvaluatorOptions& o) { return o.stop && *o.stop != 0; }

class Evaluator {
 public:
  Evaluator(const JobConfig& config, const EvaluatorOptions& options)
      : config_(config),
        options_(options),
        out_dir_(config.training.out_dir),
        claims_(out_dir_ / ".eval_claims"),
        records_(out_dir_ / "eval.jsonl") {}

  int64_t run() {
    fs::create_directories(claims_);
    const fs::path dir = config_.checkpoint_dir();
    std::fprintf(options_.log, "evaluator: watching %s for checkpoints up to step %lld\n", dir.c_str(),
                 (long long)config_.training.steps);
    std::fflush(options_.log);
    for (;;) {
      const bool last_look = stopping(options_);  // a stop still evaluates what is already there
      bool final_seen = false;
      for (const auto& ckpt : checkpoint::list_complete(dir)) {
        final_seen = final_seen || ckpt.step >= config_.training.steps;
        if (!seen_.insert(ckpt.step).second || !claim(claims_, ckpt.step)) continue;
        evaluate_one(ckpt);
      }
      if (final_seen || last_look) return evaluated_;
      wait();
    }
  }

 private:
  void evaluate_one(const checkpoint::CheckpointInfo& ckpt) {
    CheckpointModel loaded;
    try {
      loaded = load_checkpoint_model(ckpt.path.string(), options_.overrides);
    } catch (const CheckpointError& e) {  // pruned or replaced while we looked
      std::fprintf(options_.log, "evaluator: warning: skipping step %lld: %s\n", (long long)ckpt.step, e.what());
      return;
    } catch (const IoError& e) {
      std::fprintf(options_.log, "evaluator: warning: skipping step %lld: %s\n", (long long)ckpt.step, e.what());
      return;
    }
    const JobConfig& c = loaded.config;
    if (!loader_)  // the data is the job's: read it once
      loader_ = std::make_unique<DataLoader>(job_data_loader(c, 0, 1));
    EvalResult r = evaluate(*loaded.model, *loader_, c.training.eval_batches, scratch_);
    nlohmann::json record = {{"step", loaded.step},         {"val_loss", r.loss},       {"val_accuracy", r.accuracy},
                             {"predictions", r.predictions}, {"batches", r.batches},     {"checkpoint", loaded.path}};
    append_line(records_, record.dump());
    if (config_.metrics.tensorboard) {  // this evaluator's own file, made at its first record
      if (!tensorboard_) tensorboard_.emplace(config_.tensorboard_dir(), tensorboard::ScalarSource::Evaluator);
      tensorboard_->write(record);
    }
    ++evaluated_;
    std::fprintf(options_.log, "evaluator: step %lld val_loss %.4f val_accuracy %.4f\n", (long long)loaded.step,
                 r.loss, r.accuracy);
    std::fflush(options_.log);
  }

  // Sleeps one poll interval, waking early on a stop.
  void wait() const {
    const auto slice = std::chrono::milliseconds(50);
    for (auto left = options_.poll; left.count() > 0 && !stopping(options_); left -= slice)
      std::this_thread::sleep_for(std::min(slice, left));
  }

  const JobConfig& config_;
  const EvaluatorOptions& options_;
  fs::path out_dir_, claims_, records_;
  std::set<int64_t> seen_;
  std::unique_ptr<DataLoader> loader_;
  std::optional<tensorboard::TensorBoardLog> tensorboard_;
  Batch scratch_;
  int64_t evaluated_ = 0;
};

}  // namespace

int64_t run_evaluator(const JobConfig& config, const EvaluatorOptions& options) {
  return Evaluator(config, options).run();
}

}  // namespace meshtrain
