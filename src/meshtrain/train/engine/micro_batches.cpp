#include "meshtrain/train/engine/micro_batches.hpp"

#include <algorithm>
#include <cmath>

#include "meshtrain/comm/flight/flight_recorder.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/parallel/bf16_wire.hpp"
#include "meshtrain/parallel/device_collectives.hpp"

namespace meshtrain {
namespace {

// Each micro-batch of the batch as a Batch of its own, its buffers reused
// from step to step. M = 1: the batch itself.
class MicroBatchSplit {
 public:
  explicit MicroBatchSplit(int64_t micro_batches) : parts_(static_cast<size_t>(micro_batches)) {}
  int64_t count() const { return static_cast<int64_t>(parts_.size()); }
  std::span<const Batch> split(const Batch& batch) {
    if (parts_.size() == 1) return {&batch, 1};
    const int64_t size = batch.batch_size / count();
    for (int64_t m = 0; m < count(); ++m) copy_samples(batch, m * size, size, parts_[size_t(m)]);
    return parts_;
  }

 private:
  std::vector<Batch> parts_;
};

class SequentialMicroBatches final : public MicroBatchRunner {
 public:
  SequentialMicroBatches(Model& model, int64_t micro_batches) : model_(model), split_(micro_batches) {}

  double train(const Batch& batch, GradientReduction& gradients) override {
    const std::span<const Batch> parts = split_.split(batch);
    double loss_sum = 0;
    first_nonfinite_ = -1;
    for (size_t m = 0; m < parts.size(); ++m) {
      gradients.begin_micro_batch(int64_t(m), m + 1 == parts.size());
      comm::flight::set_phase(comm::flight::Phase::Forward);
      const float loss = model_.forward(parts[m]).loss;
      if (!std::isfinite(loss) && first_nonfinite_ < 0) first_nonfinite_ = int64_t(m);
      loss_sum += loss;
      comm::flight::set_phase(comm::flight::Phase::Backward);
      model_.backward();
      gradients.end_micro_batch();
    }
    return loss_sum;
  }
  int64_t first_nonfinite_loss() const override { return first_nonfinite_; }

  void evaluate(const Batch& batch, EvalSums& sums) override {
    // A batch that does not split (the last, short one) runs whole.
    const bool whole = batch.batch_size % split_.count() != 0;
    for (const Batch& part : whole ? std::span<const Batch>(&batch, 1) : split_.split(batch)) {
      const ForwardResult r = model_.forward(part);
      // Weighted by predictions so batches of different sizes average correctly.
      sums.loss_sum += static_cast<double>(r.loss) * r.count;
      sums.correct += r.correct;
      sums.predictions += r.count;
    }
  }

 private:
  Model& model_;
  MicroBatchSplit split_;
  int64_t first_nonfinite_ = -1;
};

// The device collectives of `group` (may be null) for the store's tensors
// (parallel/device_collectives.hpp).
std::unique_ptr<comm::DeviceCollectives> collectives_of(comm::ProcessGroup* group, const ParamStore& store) {
  return group ? parallel::device_collectives_for(*group, store) : nullptr;
}

class PipelineMicroBatches final : public MicroBatchRunner {
 public:
  PipelineMicroBatches(const ParallelSection& p, Gpt& model, parallel::ParallelContext& workers)
      : model_(model),
        workers_(workers),
        split_(p.micro_batches),
        reduce_dtype_(p.reduce_dtype),
        executor_(parallel::pipeline::make_schedule(p.schedule, workers.pipeline_size(), int(p.micro_batches),
                                                    int(p.virtual_stages)),
                  workers.pipeline_rank(), model, collectives_of(workers.pipeline_group(), model.store()),
                  p.reduce_dtype, nn::backend_of(model.store())),
        embedding_pair_(collectives_of(workers.embedding_group(), model.store())),
        wte16_(nn::memory_of(model.store()), MemoryKind::Communication) {
    // The tied copy: the last stage's wte when the first stage is another rank.
    for (size_t piece = 0; piece < model.pieces(); ++piece)
      if (model.piece_has_head(piece) && workers.pipeline_rank() != 0) tied_copy_ = true;
  }

  double train(const Batch& batch, GradientReduction& gradients) override {
    const std::span<const Batch> parts = split_.split(batch);
    // Each backward action is one "micro-batch" of the reduction: ZeRO-2/3
    // add each one's reduce-scatter into the shard; data parallelism starts
    // its overlapped all-reduce before the rank's last action, whose
    // announced gradients are all final.
    const parallel::pipeline::PipelineLoss loss = executor_.run(
        parts, {.before = [&](int k, bool last) { gradients.begin_micro_batch(k, last); },
                .after = [&] { gradients.end_micro_batch(); }});
    double sum = loss.loss_sum;  // the last stage's; 0 elsewhere
    // Which micro-batch is not kept; the last stage knows that one was.
    nonfinite_ = !std::isfinite(sum);
    workers_.pipeline_sum({&sum, 1});
    return sum;
  }
  int64_t first_nonfinite_loss() const override { return nonfinite_ ? -2 : -1; }

  // The first and the last stage sum their wte gradients. wte is a unit of
  // its own on both (gpt.hpp), so under ZeRO-2/3 each data rank holds the
  // same slice of it on both ends. Under parallel.reduce_dtype = "bf16" the
  // two cross in bf16, are added in fp32 and rounded once (comm's BF16), so
  // both ends widen the same bits.
  void finish_gradients(const HeldGradients& held) override {
    if (!embedding_pair_) return;
    for (const std::span<float> part : held_wte(held)) {
      if (reduce_dtype_ == Precision::Bf16)
        parallel::all_reduce_sum_in_bf16(*embedding_pair_, nn::backend_of(model_.store()), part.data(), part.size(),
                                         wte16_);
      else
        embedding_pair_->all_reduce_async(comm::Buffer(part), comm::ReduceKind::Sum)->wait();
    }
  }

  void duplicate_squares(const HeldGradients& held, double& replicated, double& sharded) const override {
    replicated = sharded = 0;
    if (!tied_copy_) return;
    double squares = 0;
    for (const std::span<float> part : held_wte(held))
      squares += nn::backend_of(model_.store()).squared_norm(part.data(), 0, part.size());
    (model_.store().view(model_.head_wte_index()).placement.replicated() ? replicated : sharded) = squares;
  }

  void evaluate(const Batch& batch, EvalSums& sums) override {
    const bool whole = batch.batch_size % split_.count() != 0;
    for (const Batch& part : whole ? std::span<const Batch>(&batch, 1) : split_.split(batch)) {
      const parallel::pipeline::PipelineLoss r = executor_.forward_only({&part, 1});
      sums.loss_sum += r.loss_sum * static_cast<double>(r.count);
      sums.correct += r.correct;
      sums.predictions += r.count;
    }
  }

  EvalSums shared(const EvalSums& sums) override {
    double values[3] = {sums.loss_sum, double(sums.correct), double(sums.predictions)};
    workers_.pipeline_sum(values);  // the last stage's, 0 from the others
    return {values[0], static_cast<int64_t>(values[1]), static_cast<int64_t>(values[2])};
  }

  const parallel::pipeline::PipelineExecutor* pipeline() const override { return &executor_; }

 private:
  // The parts of the held gradients that belong to this rank's wte.
  std::vector<std::span<float>> held_wte(const HeldGradients& held) const {
    std::vector<std::span<float>> parts;
    for (const HeldPart& part : held_parts(held, model_.store().view(model_.head_wte_index())))
      parts.push_back(part.values);
    return parts;
  }

  Gpt& model_;
  parallel::ParallelContext& workers_;
  MicroBatchSplit split_;
  Precision reduce_dtype_;  // parallel.reduce_dtype: the wte sum's
  bool nonfinite_ = false;  // the last train()'s loss sum on this stage
  parallel::pipeline::PipelineExecutor executor_;
  // The first and last stage's pair (tied wte), null elsewhere; over NCCL
  // where the job chose it (comm/nccl/nccl_groups.hpp), else host-staged.
  std::unique_ptr<comm::DeviceCollectives> embedding_pair_;
  bool tied_copy_ = false;
  DeviceArray<Bf16> wte16_;  // reduce_dtype bf16: the wte gradient on the wire, in the store's memory
};

}  // namespace

std::unique_ptr<MicroBatchRunner> sequential_micro_batches(Model& model, int64_t micro_batches) {
  return std::make_unique<SequentialMicroBatches>(model, micro_batches);
}

std::unique_ptr<MicroBatchRunner> make_micro_batches(const ParallelSection& parallel, Model& model,
                                                     parallel::ParallelContext& workers) {
  if (workers.pipeline_size() == 1) return sequential_micro_batches(model, parallel.micro_batches);
  auto* gpt = dynamic_cast<Gpt*>(&model);
  if (!gpt) throw ConfigError("parallel.pipeline: pipeline stages split a GPT, not model '" + model.kind() + "'");
  return std::make_unique<PipelineMicroBatches>(parallel, *gpt, workers);
}

}  // namespace meshtrain
