#pragma once
// Which TensorBoard scalars a metrics record becomes. Every top-level field
// that is a number (not a boolean, string, list or object) is one scalar,
// at the record's "step"; "rank" and "time" are not ("time" is the event's
// wall time). The tag is a section, a slash and a name (TensorBoard groups
// charts by the section):
//
//   trainer (metrics.jsonl)
//     val_X                       val/X       (val_loss -> val/loss, val_accuracy, val_batches)
//     peak_X                      memory/peak_X  (peak tracked MiB so far, per kind and total)
//     comm_X                      comm/X      (comm_ms -> comm/ms, comm_hidden_share -> comm/hidden_share, ...)
//     aux_loss, z_loss, dropped_tokens        moe/<key>  (the MoE routing totals of the step)
//     batch_size, global_batch, effective_lr, workers, data_parallel, tensor_parallel,
//     pipeline_parallel, expert_parallel, zero_stage  job/<key>  (the job's shape)
//     any other number            train/<key> (loss, lr, grad_norm, step_ms, tokens_per_s or
//                                              samples_per_s, gflop_per_s, elapsed_s, comm_bytes...)
//     the run's last record (the one with "memory": "peak"): peak_X -> run/peak_X
//   evaluator (eval.jsonl)
//     val_X -> eval/X, any other number -> eval/<key> (eval/loss, eval/accuracy, eval/predictions, eval/batches)
//
// Not written: lists and objects (the MoE per-layer "moe" list, "pipeline_stages"),
// strings, booleans, and records without an integer "step".
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/train/report/tensorboard/event_proto.hpp"

namespace meshtrain::tensorboard {

enum class ScalarSource { Trainer, Evaluator };

struct ScalarRecord {
  int64_t step = 0;
  std::optional<double> wall_time;  // the record's "time", when it has one
  std::vector<Scalar> scalars;      // in key order
};

// nullopt: the record has no integer step or no number to show.
std::optional<ScalarRecord> scalars_of_record(const nlohmann::json& record, ScalarSource source);

}  // namespace meshtrain::tensorboard
