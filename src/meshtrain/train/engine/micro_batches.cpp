#include "meshtrain/train/engine/micro_batches.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/optim/clip.hpp"

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
    for (size_t m = 0; m < parts.size(); ++m) {
      gradients.begin_micro_batch(int64_t(m), m + 1 == parts.size());
      loss_sum += model_.forward(parts[m]).loss;
      model_.backward();
      gradients.end_micro_batch();
    }
    return loss_sum;
  }

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
};

class PipelineMicroBatches final : public MicroBatchRunner {
 public:
  PipelineMicroBatches(const ParallelSection& p, Gpt& model, WorkerGroup& workers)
      : model_(model),
        workers_(workers),
        split_(p.micro_batches),
        executor_(parallel::pipeline::make_schedule(p.schedule, workers.pipeline_size(), int(p.micro_batches),
                                                    int(p.virtual_stages)),
                  workers.pipeline_rank(), model, workers.pipeline_group()) {
    // The tied copy: the last stage's wte when the first stage is another rank.
    for (size_t piece = 0; piece < model.pieces(); ++piece)
      if (model.piece_has_head(piece) && workers.pipeline_rank() != 0) tied_copy_ = true;
  }

  double train(const Batch& batch, GradientReduction& gradients) override {
    const std::span<const Batch> parts = split_.split(batch);
    // Every gradient the rank's last compute action announces is final, so
    // data parallelism may start its overlapped all-reduce there.
    const parallel::pipeline::PipelineLoss loss =
        executor_.run(parts, [&] { gradients.begin_micro_batch(0, true); });
    gradients.end_micro_batch();
    double sum = loss.loss_sum;  // the last stage's; 0 elsewhere
    workers_.pipeline_sum({&sum, 1});
    return sum;
  }

  void finish_gradients() override {
    comm::ProcessGroup* pair = workers_.embedding_group();
    if (!pair) return;
    ParamStore& store = model_.store();
    const size_t wte = model_.head_wte_index();
    pair->all_reduce(std::span<float>(store.grad(wte), store.view(wte).numel), comm::ReduceKind::Sum);
  }

  void duplicate_squares(double& replicated, double& sharded) const override {
    replicated = sharded = 0;
    if (!tied_copy_) return;
    const ParamStore& store = model_.store();
    const size_t index = model_.head_wte_index();
    const ParamView& wte = store.view(index);
    const double squares = squared_norm_range(store.grads(), wte.offset, wte.offset + wte.numel);
    (wte.placement.replicated() ? replicated : sharded) = squares;
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
  Gpt& model_;
  WorkerGroup& workers_;
  MicroBatchSplit split_;
  parallel::pipeline::PipelineExecutor executor_;
  bool tied_copy_ = false;
};

}  // namespace

std::unique_ptr<MicroBatchRunner> sequential_micro_batches(Model& model, int64_t micro_batches) {
  return std::make_unique<SequentialMicroBatches>(model, micro_batches);
}

std::unique_ptr<MicroBatchRunner> make_micro_batches(const ParallelSection& parallel, Model& model,
                                                     WorkerGroup& workers) {
  if (workers.pipeline_size() == 1) return sequential_micro_batches(model, parallel.micro_batches);
  auto* gpt = dynamic_cast<Gpt*>(&model);
  if (!gpt) throw ConfigError("parallel.pipeline: pipeline stages split a GPT, not model '" + model.kind() + "'");
  return std::make_unique<PipelineMicroBatches>(parallel, *gpt, workers);
}

}  // namespace meshtrain
