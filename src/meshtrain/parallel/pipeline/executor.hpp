#pragma once
// Runs one pipeline rank's actions of a Schedule (action.hpp) on the pieces
// of a model this rank holds (nn/pipeline_model.hpp): chunk c of the rank is
// the model's piece c, virtual stage c * P + rank.
//
// Activation slots: a micro-batch takes the lowest free slot of its chunk at
// its first action there (its input's receive, or its forward) and frees it
// when its backward is complete (Backward, or BackwardWeight after
// BackwardInput), so a chunk holds at most the schedule's micro-batches in
// flight (validator.hpp's peak; the input gradient to send stays valid
// until the slot's next backward, pipeline_model.hpp).
//
// Communication: each run of consecutive sends and receives in the rank's
// list is posted as one exchange on the pipeline group's device collectives
// (comm/device/: NCCL's grouped sends and receives, or the host's exchange,
// staged through host memory off the CPU), so neighbours that send to each
// other at once (1F1B's steady state) do not wait on each other. A send
// completes when its peer has received it.
//
// The step's gradient reduction hooks in around every backward action
// (Backward, BackwardInput, BackwardWeight): before(k, last) with k the
// action's place among the rank's backward actions and `last` set for the
// rank's final compute action (data parallelism starts its overlapped
// all-reduce there: every gradient that action announces is final), and
// after() (ZeRO-2/3 reduce what the action produced). The spans of every
// action are kept for traces.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/core/batch.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/core/function_ref.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/pipeline_model.hpp"
#include "meshtrain/parallel/pipeline/action.hpp"

namespace meshtrain::parallel::pipeline {

// One action as it ran, in seconds since the step began. Communication runs
// are one span each, named by their first action.
struct ActionSpan {
  Action action;
  double start_s = 0, end_s = 0;
};

// What the last stage's forwards produced (zero on the other ranks).
struct PipelineLoss {
  double loss_sum = 0;  // sum over micro-batches of each one's mean loss
  int64_t correct = 0, count = 0;
};

// The slots run() takes on `rank`, per chunk (the most micro-batches of
// the chunk between their first action and the end of their backward):
// what the executor's slot rule makes of the schedule, known before any
// process runs it (the forecast's activation memory).
std::vector<int> slots_needed(const Schedule& schedule, int rank);

struct BackwardHooks {
  FunctionRef<void(int index, bool last)> before;
  FunctionRef<void()> after;
};

class PipelineExecutor {
 public:
  // group: the pipeline group's device collectives (group rank = pipeline
  // rank), null for P = 1. Throws Error when the model does not hold one
  // piece per chunk, or the pieces' embedding and head do not sit on the
  // first and last virtual stage.
  // wire = bf16 (parallel.reduce_dtype): a training step's activations and
  // gradients cross between stages rounded to bf16 and are widened
  // (exactly) on arrival: half the bytes. Evaluation sends fp32.
  // backend: the model's (training.device); the rounding and widening run
  // there, in buffers in its memory.
  PipelineExecutor(Schedule schedule, int rank, nn::PipelineModel& model,
                   std::unique_ptr<comm::DeviceCollectives> group, Precision wire = Precision::Fp32,
                   kernels::Backend& backend = kernels::cpu_backend());

  // One training step's forwards and backwards over the schedule's M
  // micro-batches (all of equal shape; they must stay alive until this
  // returns). Gradients add into the model's store.
  PipelineLoss run(std::span<const Batch> micro_batches, const BackwardHooks& hooks);
  // Forwards only (evaluation): every micro-batch through every stage in
  // order, no slots kept beyond one.
  PipelineLoss forward_only(std::span<const Batch> micro_batches);

  const Schedule& schedule() const { return schedule_; }
  int rank() const { return rank_; }
  // The last run()'s spans, in the rank's order, and when it began (seconds
  // of the steady clock, which every process on a host shares).
  const std::vector<ActionSpan>& spans() const { return spans_; }
  double step_start_s() const {
    return std::chrono::duration<double>(step_start_.time_since_epoch()).count();
  }
  // The most slots a chunk has used so far.
  size_t peak_slots() const;

 private:
  struct MicroBatchState {
    int slot = -1;
    const float* output = nullptr;      // forward's output for the next stage
    const float* input_grad = nullptr;  // backward's input gradient for the previous stage
    bool backward_done = false;
  };
  int stage(int chunk) const { return schedule_.stage_of(rank_, chunk); }
  bool first_stage(int chunk) const { return stage(chunk) == 0; }
  bool last_stage(int chunk) const { return stage(chunk) == schedule_.stages() - 1; }
  MicroBatchState& state(const Action& a) { return states_[size_t(a.chunk)][size_t(a.micro_batch)]; }
  int take_slot(const Action& a);
  void release_if_done(const Action& a);
  void compute(const Action& a, std::span<const Batch> micro_batches, PipelineLoss& loss);
  // Posts actions [begin, end) (sends and receives) as one exchange.
  void communicate(std::span<const Action> run, const Batch& shape);
  // One exchange of `floats`-element activations or gradients: each send's
  // (peer, data), each receive's (peer, where it belongs); under the bf16
  // wire rounded before and widened after.
  void exchange(const std::vector<std::pair<int, const float*>>& sends,
                const std::vector<std::pair<int, float*>>& recvs, size_t floats, bool bf16);
  // buffers[i] of `floats` bf16 elements in the backend's memory, created when missing.
  Bf16* wire_buffer(std::vector<DeviceArray<Bf16>>& buffers, size_t i, size_t floats);
  double now_s() const;

  Schedule schedule_;
  int rank_;
  nn::PipelineModel& model_;
  std::unique_ptr<comm::DeviceCollectives> group_;
  kernels::Backend& backend_;
  std::vector<std::vector<MicroBatchState>> states_;  // [chunk][micro-batch]
  std::vector<std::vector<bool>> slot_busy_;          // [chunk][slot]
  std::vector<ActionSpan> spans_;
  std::chrono::steady_clock::time_point step_start_;
  bool bf16_wire_;
  // bf16 wire only: one buffer per send and per receive of an exchange.
  std::vector<DeviceArray<Bf16>> send16_, recv16_;
};

}  // namespace meshtrain::parallel::pipeline
