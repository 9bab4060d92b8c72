#pragma once
// A step whose global loss or gradient norm is not finite: the job stops
// with DivergedError (exit status kExitDiverged), which a supervisor does not
// restart, since the same data and state would replay it.
//
// No collective is added to healthy steps: the loss and the squared norm
// are already sums over the ranks, and a NaN or an infinity on one rank
// makes them non-finite on all. Only on that path do the ranks exchange
// what each saw locally, before the gradient reduction where it can: which
// micro-batch's own loss was not finite, and the first gradient tensor with
// a non-finite element in what the rank holds.
#include <cstdint>

#include "meshtrain/train/engine/train_step.hpp"

namespace meshtrain {

// Every worker calls it at the same step (they all see the same global loss
// and norm). Throws DivergedError naming the step, the ranks and micro-batch
// whose loss was not finite, and this rank's first non-finite gradient.
[[noreturn]] void stop_diverged(const StepContext& ctx, const HeldGradients& held, int64_t step, float loss,
                                float grad_norm);

}  // namespace meshtrain
