#include "meshtrain/parallel/pipeline/executor.hpp"

#include <algorithm>
#include <string>

#include "meshtrain/comm/flight/flight_recorder.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel::pipeline {

std::vector<int> slots_needed(const Schedule& schedule, int rank) {
  std::vector<int> live(size_t(schedule.chunks), 0), peak(size_t(schedule.chunks), 0);
  // [chunk][micro-batch]: 0 not yet, 1 holding a slot, 2 done
  std::vector<std::vector<int>> state(size_t(schedule.chunks), std::vector<int>(size_t(schedule.micro_batches), 0));
  for (const Action& a : schedule.actions[size_t(rank)]) {
    int& st = state[size_t(a.chunk)][size_t(a.micro_batch)];
    const auto c = size_t(a.chunk);
    const bool takes = a.kind == ActionKind::RecvActivation || a.kind == ActionKind::Forward;
    // A whole backward, or the weight half after the input half.
    const bool frees = a.kind == ActionKind::BackwardWeight || a.kind == ActionKind::Backward;
    if (takes && st == 0) {
      st = 1;
      peak[c] = std::max(peak[c], ++live[c]);
    } else if (frees && st == 1) {
      st = 2;
      --live[c];
    }
  }
  return peak;
}

PipelineExecutor::PipelineExecutor(Schedule schedule, int rank, nn::PipelineModel& model,
                                   std::unique_ptr<comm::DeviceCollectives> group, Precision wire,
                                   kernels::Backend& backend)
    : schedule_(std::move(schedule)),
      rank_(rank),
      model_(model),
      group_(std::move(group)),
      backend_(backend),
      bf16_wire_(wire == Precision::Bf16) {
  const int V = schedule_.chunks;
  if (model_.pieces() != static_cast<size_t>(V))
    throw Error("pipeline executor: the schedule runs " + std::to_string(V) + " chunk(s) on rank " +
                std::to_string(rank_) + ", but the model holds " + std::to_string(model_.pieces()) + " piece(s)");
  for (int c = 0; c < V; ++c)
    if (model_.piece_has_embedding(size_t(c)) != first_stage(c) || model_.piece_has_head(size_t(c)) != last_stage(c))
      throw Error("pipeline executor: piece " + std::to_string(c) + " of rank " + std::to_string(rank_) +
                  " (virtual stage " + std::to_string(stage(c)) + ") must hold the embedding exactly when it is the "
                  "first stage and the head exactly when it is the last");
  if (schedule_.ranks > 1 && (!group_ || group_->size() != schedule_.ranks || group_->rank() != rank_))
    throw Error("pipeline executor: rank " + std::to_string(rank_) + " of " + std::to_string(schedule_.ranks) +
                " needs the pipeline group with its rank there");
  slot_busy_.resize(size_t(V));
}

double PipelineExecutor::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
}

size_t PipelineExecutor::peak_slots() const {
  size_t peak = 0;
  for (size_t c = 0; c < model_.pieces(); ++c) peak = std::max(peak, model_.slots_made(c));
  return peak;
}

int PipelineExecutor::take_slot(const Action& a) {
  MicroBatchState& st = state(a);
  if (st.slot >= 0) return st.slot;
  auto& busy = slot_busy_[size_t(a.chunk)];
  const auto free = std::find(busy.begin(), busy.end(), false);
  st.slot = static_cast<int>(free - busy.begin());
  if (free == busy.end())
    busy.push_back(true);
  else
    *free = true;
  return st.slot;
}

void PipelineExecutor::release_if_done(const Action& a) {
  MicroBatchState& st = state(a);
  if (st.slot < 0 || !st.backward_done) return;
  slot_busy_[size_t(a.chunk)][size_t(st.slot)] = false;
  st.slot = -1;
}

void PipelineExecutor::compute(const Action& a, std::span<const Batch> micro_batches, PipelineLoss& loss) {
  comm::flight::set_phase(a.kind == ActionKind::Forward ? comm::flight::Phase::Forward : comm::flight::Phase::Backward);
  const auto piece = static_cast<size_t>(a.chunk);
  MicroBatchState& st = state(a);
  switch (a.kind) {
    case ActionKind::Forward: {
      const int slot = take_slot(a);
      ForwardResult r;
      st.output = model_.forward_piece(piece, size_t(slot), micro_batches[size_t(a.micro_batch)], &r);
      if (last_stage(a.chunk)) {
        loss.loss_sum += r.loss;
        loss.correct += r.correct;
        loss.count += r.count;
      }
      return;
    }
    case ActionKind::Backward:
    case ActionKind::BackwardInput: {
      const bool split = a.kind == ActionKind::BackwardInput;
      st.input_grad = model_.backward_piece(piece, size_t(st.slot), split);
      st.backward_done = !split;
      release_if_done(a);
      return;
    }
    case ActionKind::BackwardWeight:
      model_.backward_piece_weights(piece, size_t(st.slot));
      st.backward_done = true;
      release_if_done(a);
      return;
    default:
      throw Error("pipeline executor: " + describe(a) + " is not a compute action");
  }
}

void PipelineExecutor::communicate(std::span<const Action> run, const Batch& shape) {
  const int64_t B = shape.batch_size, T = shape.seq_len;
  std::vector<std::pair<int, const float*>> sends;
  std::vector<std::pair<int, float*>> recvs;
  for (const Action& a : run) {
    const int peer = peer_rank(schedule_, rank_, a);
    MicroBatchState& st = state(a);
    const auto piece = static_cast<size_t>(a.chunk);
    switch (a.kind) {
      case ActionKind::SendActivation:
        if (!st.output) throw Error("pipeline executor: rank " + std::to_string(rank_) + " " + describe(a) + " before its forward");
        sends.emplace_back(peer, st.output);
        break;
      case ActionKind::SendGradient:
        if (!st.input_grad)
          throw Error("pipeline executor: rank " + std::to_string(rank_) + " " + describe(a) + " before its backward");
        sends.emplace_back(peer, st.input_grad);
        break;
      case ActionKind::RecvActivation:
        recvs.emplace_back(peer, model_.input_buffer(piece, size_t(take_slot(a)), B, T));
        break;
      case ActionKind::RecvGradient:
        if (st.slot < 0)
          throw Error("pipeline executor: rank " + std::to_string(rank_) + " " + describe(a) + " before its forward");
        recvs.emplace_back(peer, model_.output_gradient_buffer(piece, size_t(st.slot), B, T));
        break;
      default:
        throw Error("pipeline executor: " + describe(a) + " is not a communication action");
    }
  }
  try {
    exchange(sends, recvs, static_cast<size_t>(model_.activation_floats(B, T)), bf16_wire_);
  } catch (const CommError& e) {
    // Name the stages: a dead or hung stage shows up here as its
    // neighbour's failed exchange (within the transport's timeout).
    std::string peers;
    for (const Action& a : run) {
      const std::string peer = std::to_string(peer_rank(schedule_, rank_, a));
      if (peers.find("stage " + peer + ",") == std::string::npos) peers += "stage " + peer + ", ";
    }
    throw CommError("pipeline stage " + std::to_string(rank_) + " of " + std::to_string(schedule_.ranks) + ": " +
                    describe(run.front()) + " with " + peers.substr(0, peers.size() - 2) + " failed: " + e.what());
  }
}

Bf16* PipelineExecutor::wire_buffer(std::vector<DeviceArray<Bf16>>& buffers, size_t i, size_t floats) {
  while (buffers.size() <= i) buffers.emplace_back(backend_.allocator(), MemoryKind::Communication);
  buffers[i].ensure(floats);
  return buffers[i].raw();
}

void PipelineExecutor::exchange(const std::vector<std::pair<int, const float*>>& sends,
                                const std::vector<std::pair<int, float*>>& recvs, size_t floats, bool bf16) {
  std::vector<comm::DeviceSend> out;
  std::vector<comm::DeviceRecv> in;
  // bf16 wire: the sends rounded into buffers of their own, the receives
  // landing in others and widened into the model's buffers afterwards.
  for (size_t i = 0; i < sends.size(); ++i) {
    const auto [peer, data] = sends[i];
    if (!bf16) {
      out.push_back({peer, comm::ConstBuffer(data, floats, comm::DataType::F32)});
      continue;
    }
    Bf16* rounded = wire_buffer(send16_, i, floats);
    backend_.to_bf16(data, rounded, floats);
    out.push_back({peer, comm::ConstBuffer(rounded, floats, comm::DataType::BF16)});
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    const auto [peer, into] = recvs[i];
    in.push_back({peer, bf16 ? comm::Buffer(wire_buffer(recv16_, i, floats), floats, comm::DataType::BF16)
                             : comm::Buffer(into, floats, comm::DataType::F32)});
  }
  group_->exchange_async(std::move(out), std::move(in))->wait();
  if (bf16)
    for (size_t i = 0; i < recvs.size(); ++i) backend_.widen_divided(recv16_[i].raw(), recvs[i].second, floats, 1.0f);
}

PipelineLoss PipelineExecutor::run(std::span<const Batch> micro_batches, const BackwardHooks& hooks) {
  const int M = schedule_.micro_batches;
  if (static_cast<int>(micro_batches.size()) != M)
    throw Error("pipeline executor: the schedule runs " + std::to_string(M) + " micro-batches, given " +
                std::to_string(micro_batches.size()));
  step_start_ = std::chrono::steady_clock::now();
  spans_.clear();
  states_.assign(size_t(schedule_.chunks), std::vector<MicroBatchState>(size_t(M)));
  for (auto& busy : slot_busy_) std::fill(busy.begin(), busy.end(), false);
  const std::vector<Action>& actions = schedule_.actions[size_t(rank_)];
  size_t last_compute = actions.size();
  for (size_t i = 0; i < actions.size(); ++i)
    if (is_compute(actions[i].kind)) last_compute = i;
  PipelineLoss loss;
  int backwards = 0;
  for (size_t i = 0; i < actions.size();) {
    const double start = now_s();
    if (is_compute(actions[i].kind)) {
      const bool backward = actions[i].kind != ActionKind::Forward;
      if (backward) hooks.before(backwards, i == last_compute);
      compute(actions[i], micro_batches, loss);
      if (backward) {
        hooks.after();
        ++backwards;
      }
      spans_.push_back({actions[i], start, now_s()});
      ++i;
      continue;
    }
    size_t end = i;
    while (end < actions.size() && !is_compute(actions[end].kind)) ++end;
    communicate(std::span(actions).subspan(i, end - i), micro_batches[0]);
    spans_.push_back({actions[i], start, now_s()});
    i = end;
  }
  return loss;
}

PipelineLoss PipelineExecutor::forward_only(std::span<const Batch> micro_batches) {
  PipelineLoss loss;
  const int P = schedule_.ranks, S = schedule_.stages();
  for (size_t m = 0; m < micro_batches.size(); ++m) {
    const Batch& batch = micro_batches[m];
    const int64_t B = batch.batch_size, T = batch.seq_len;
    const auto floats = static_cast<size_t>(model_.activation_floats(B, T));
    // Stage by stage: stage s runs on rank s % P, as its chunk s / P.
    for (int s = 0; s < S; ++s) {
      const int r = s % P, chunk = s / P;
      if (r != rank_) continue;
      const auto piece = static_cast<size_t>(chunk);
      if (s > 0) exchange({}, {{(r - 1 + P) % P, model_.input_buffer(piece, 0, B, T)}}, floats, false);
      ForwardResult result;
      const float* out = model_.forward_piece(piece, 0, batch, &result);
      if (s == S - 1) {
        loss.loss_sum += result.loss;
        loss.correct += result.correct;
        loss.count += result.count;
      } else {
        exchange({{(r + 1) % P, out}}, {}, floats, false);
      }
    }
  }
  return loss;
}

}  // namespace meshtrain::parallel::pipeline
