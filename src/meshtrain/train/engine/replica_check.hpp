#pragma once
// Silent data corruption (training.check_replicas_every): the workers that
// hold replicas of the same parameters (the data-parallel ways of one tensor,
// pipeline and expert position: plain DP, ZeRO-1 and 2, the replicas of a
// TP/PP/EP layout) must hold the same bits after every update. A flipped bit
// in one host's memory or a faulty core breaks that without any error, and
// the next all-reduce spreads the damage. Every N steps each worker hashes
// each of its parameter tensors; the hashes are gathered (16 bytes per
// tensor) and compared within each replica set. A mismatch stops the job
// (exit status 1, so `meshtrain run` restarts it from its newest checkpoint)
// naming the worker that differs from the others (the minority; with two
// replicas, both) and the tensors.
#include <cstdint>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/parallel/parallel_context.hpp"

namespace meshtrain {

// Every worker calls it at the same step. Throws Error on a mismatch.
void check_replicas(const ParamStore& store, parallel::ParallelContext& workers, int64_t step);

// The fault knob's silent corruption (MESHTRAIN_FAULT=flip_bit:...): flips the
// lowest bit of the first parameter of the store's middle tensor.
void flip_parameter_bit(ParamStore& store);

}  // namespace meshtrain
