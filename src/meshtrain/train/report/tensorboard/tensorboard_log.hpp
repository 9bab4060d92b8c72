#pragma once
// Metrics records as TensorBoard scalars (metrics.tensorboard): each record
// with numbers becomes one event in this process's event file under `dir`
// (scalar_tags.hpp says which tags). The trainer's lead worker writes
// through its MetricsLog, which passes every record on; each evaluator
// writes its own file in the same folder (kEvaluatorSuffix), which
// TensorBoard shows as the same run.
#include <cstdint>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "meshtrain/train/report/tensorboard/event_file.hpp"
#include "meshtrain/train/report/tensorboard/scalar_tags.hpp"

namespace meshtrain::tensorboard {

class TensorBoardLog {
 public:
  // name_time_after: see EventFileWriter.
  TensorBoardLog(const std::filesystem::path& dir, ScalarSource source, int64_t name_time_after = -1);
  // A record without an integer "step" or without numbers writes nothing.
  // Its "time", if any, is the event's wall time; else now.
  void write(const nlohmann::json& record);
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  ScalarSource source_;
  EventFileWriter file_;
};

// The trainer's, for a run that continues from `from_step` (0: from the
// start): first the older trainer files in `dir` lose their events after
// from_step (event_trim.hpp; done even when `enabled` is false, so a later
// run with it on shows each step once); then, if enabled, a new file whose
// name sorts after theirs.
std::unique_ptr<TensorBoardLog> open_trainer_tensorboard(const std::filesystem::path& dir, int64_t from_step,
                                                         bool enabled);

}  // namespace meshtrain::tensorboard
