#pragma once
// A pipeline schedule as data: for every pipeline rank, the ordered list of
// actions it performs in one training step. One executor runs any list; the
// validator (validator.hpp) simulates them all offline.
//
// Terms. P ranks, M micro-batches, V model chunks per rank (1 unless the
// schedule is interleaved). The model is cut into S = V*P consecutive virtual
// stages; chunk c on rank r is virtual stage s = c*P + r (Megatron's
// interleaving), so stage s lives on rank s % P as chunk s / P.
//
// An action names the local stage only (micro-batch, chunk); its peer follows
// from the stage:
//   Forward(m, c)         runs stage s forward on micro-batch m
//   Backward(m, c)        input and weight gradient of stage s together
//   BackwardInput(m, c)   "B": the input gradient only (what stage s-1 waits for)
//   BackwardWeight(m, c)  "W": the weight gradient only, after B; free to defer
//   SendActivation(m, c)  stage s's output   -> stage s+1 (rank (r+1) % P)
//   RecvActivation(m, c)  stage s's input    <- stage s-1 (rank (r-1+P) % P)
//   SendGradient(m, c)    stage s's input gradient  -> stage s-1
//   RecvGradient(m, c)    stage s's output gradient <- stage s+1
// So SendActivation(m, s) pairs with RecvActivation(m, s+1) and
// SendGradient(m, s) with RecvGradient(m, s-1). Stage 0 receives no
// activation and sends no gradient; stage S-1 the other way round.
//
// Sends are buffered (they never wait); a receive waits for its send. The
// generators place each receive right before the compute that needs it and
// each send right after the compute that produced it, so in 1F1B's steady
// state a SendActivation is directly followed by the RecvGradient from the
// same peer (and SendGradient by RecvActivation): an executor posts any send
// followed directly by receives as one exchange (batched isend/irecv,
// Megatron's send_forward_recv_backward), which is what keeps two ranks that
// send to each other at once from waiting on each other (is_exchange below).
#include <span>
#include <string>
#include <vector>

#include "meshtrain/core/enum_names.hpp"

namespace meshtrain::parallel::pipeline {

enum class ActionKind {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
};
inline constexpr EnumName<ActionKind> kActionKindNames[] = {
    {ActionKind::Forward, "forward"},
    {ActionKind::Backward, "backward"},
    {ActionKind::BackwardInput, "backward_input"},
    {ActionKind::BackwardWeight, "backward_weight"},
    {ActionKind::SendActivation, "send_activation"},
    {ActionKind::RecvActivation, "recv_activation"},
    {ActionKind::SendGradient, "send_gradient"},
    {ActionKind::RecvGradient, "recv_gradient"},
};
constexpr std::span<const EnumName<ActionKind>> enum_names(ActionKind) { return kActionKindNames; }

struct Action {
  ActionKind kind;
  int micro_batch;
  int chunk = 0;  // model chunk on this rank; virtual stage chunk*P + rank
  bool operator==(const Action&) const = default;
};

constexpr bool is_send(ActionKind k) { return k == ActionKind::SendActivation || k == ActionKind::SendGradient; }
constexpr bool is_recv(ActionKind k) { return k == ActionKind::RecvActivation || k == ActionKind::RecvGradient; }
constexpr bool is_compute(ActionKind k) { return !is_send(k) && !is_recv(k); }

// Actions [i, i+1] of one rank that an executor posts together: a send and
// the receive right after it.
constexpr bool is_exchange(const Action& first, const Action& second) {
  return is_send(first.kind) && is_recv(second.kind);
}

struct Schedule {
  int ranks = 1;          // P
  int micro_batches = 1;  // M
  int chunks = 1;         // V
  std::vector<std::vector<Action>> actions;  // [rank][position]

  int stages() const { return ranks * chunks; }
  int stage_of(int rank, int chunk) const { return chunk * ranks + rank; }
};

// The virtual stage a send or receive of `action` on `rank` talks to, and the
// rank holding it: the stage after for activations out and gradients in, the
// stage before otherwise.
int peer_stage(const Schedule& schedule, int rank, const Action& action);
inline int peer_rank(const Schedule& schedule, int rank, const Action& action) {
  return peer_stage(schedule, rank, action) % schedule.ranks;
}

// "forward(micro-batch 3, chunk 1)" for messages.
std::string describe(const Action& action);

}  // namespace meshtrain::parallel::pipeline
