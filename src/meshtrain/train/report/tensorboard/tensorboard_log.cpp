#include "meshtrain/train/report/tensorboard/tensorboard_log.hpp"

#include "meshtrain/train/report/tensorboard/event_proto.hpp"
#include "meshtrain/train/report/tensorboard/event_trim.hpp"

namespace meshtrain::tensorboard {

TensorBoardLog::TensorBoardLog(const std::filesystem::path& dir, ScalarSource source, int64_t name_time_after)
    : source_(source), file_(dir, source == ScalarSource::Evaluator ? kEvaluatorSuffix : "", name_time_after) {}

void TensorBoardLog::write(const nlohmann::json& record) {
  const auto scalars = scalars_of_record(record, source_);
  if (!scalars) return;
  file_.write_event(encode_scalar_event(scalars->wall_time.value_or(wall_time_now()), scalars->step, scalars->scalars));
}

std::unique_ptr<TensorBoardLog> open_trainer_tensorboard(const std::filesystem::path& dir, int64_t from_step,
                                                         bool enabled) {
  drop_events_after(dir, from_step);
  if (!enabled) return nullptr;
  // A restart within the same second, or a clock set back, still sorts after the older files.
  return std::make_unique<TensorBoardLog>(dir, ScalarSource::Trainer, newest_name_time(dir, is_trainer_event_file));
}

}  // namespace meshtrain::tensorboard
