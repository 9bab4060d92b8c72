#pragma once
// The offline check of a schedule (action.hpp): simulates every rank on one
// thread with a cost per compute action, so a schedule that deadlocks, skips
// or repeats work, or breaks a dependency is caught before any process runs
// it, and its bubble and activation memory are known in advance.
//
// The model:
// - Forward costs `forward`, BackwardInput `backward_input`, BackwardWeight
//   `backward_weight`, Backward (both halves) their sum; sends and receives
//   cost their ranks no compute.
// - A send never waits (buffered); its message arrives `transfer` (the
//   sender's) after it was sent, or after the sender's previous message to
//   the same rank arrived, whichever is later (one link each way between
//   two ranks, messages one after another). A receive waits until its
//   message (action.hpp) has arrived, and its rank's clock moves to that
//   time.
// - A rank runs its actions in order; the simulation steps every rank as far
//   as it can until all are done or none can move (a deadlock).
//
// The rules, each a thrown Error naming the rank, the action and its
// micro-batch:
// - no deadlock (the message lists every stuck rank, its action and the rank
//   it waits for);
// - every micro-batch runs Forward exactly once per virtual stage, and either
//   Backward or BackwardInput and BackwardWeight exactly once each;
// - dependencies: Forward of stage s > 0 after receiving its input (so after
//   stage s-1's Forward); a backward of stage s after its own Forward and,
//   below the last stage, after receiving its output gradient (so after stage
//   s+1's backward); BackwardWeight after BackwardInput; a send after the
//   compute that produced what it sends;
// - between two ranks, messages are received in the order they are sent
//   (transports match them in order, transport.hpp);
// - every send is received exactly once, every receive has its send, and
//   none crosses past the first or last stage.
#include <span>
#include <vector>

#include "meshtrain/parallel/pipeline/action.hpp"

namespace meshtrain::parallel::pipeline {

struct ActionCosts {
  double forward = 1.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
  double transfer = 0.0;  // a message's time on the link, from this rank to its neighbour
};

struct ScheduleReport {
  double makespan = 0.0;             // when the last rank finishes its last action
  std::vector<double> idle;          // [rank]: makespan minus the rank's compute time
  double bubble = 0.0;               // sum(idle) / (P * makespan)
  // [rank]: most (micro-batch, chunk) pairs whose activations the rank held
  // at once: Forward done, Backward or BackwardInput not yet. This is the
  // activation memory the schedule needs (in units of one chunk's
  // activations for one micro-batch).
  std::vector<int> peak_in_flight;
  // [rank]: most pairs between BackwardInput and BackwardWeight at once.
  // W keeps only its layers' inputs and output gradients, much less than
  // the full activations, so it is counted apart rather than in
  // peak_in_flight.
  std::vector<int> peak_weight_pending;
};

// Throws Error on the first broken rule; otherwise the timing and memory.
ScheduleReport validate_schedule(const Schedule& schedule, const ActionCosts& costs = {});
// With each rank's own costs (stages of unequal work or speed), one row per rank.
ScheduleReport validate_schedule(const Schedule& schedule, std::span<const ActionCosts> rank_costs);

}  // namespace meshtrain::parallel::pipeline
