#pragma once
// A resumed run's TensorBoard files, made to agree with the checkpoint it
// resumes from. TensorBoard shows every event of every file in a run's
// folder, so the events a killed run logged after its last checkpoint would
// show twice once the resumed run logs those steps again. Before the
// resumed run writes, each trainer event file in `dir` (not an evaluator's:
// event_file.hpp) loses its events with step > from_step and any partial
// record at its end: the records kept are copied to a temporary file (a name
// TensorBoard ignores) that is renamed over the original, so a reader or a
// second kill sees the old file or the new one. A file left with no summary
// is removed. Running it twice is the same as once; a missing dir is none.
// from_step 0: a run that starts over removes the old run's files.
#include <cstdint>
#include <filesystem>

namespace meshtrain::tensorboard {

// Returns the number of events dropped. Throws IoError.
int64_t drop_events_after(const std::filesystem::path& dir, int64_t from_step);

// Whether a file in a run's folder is one the trainer wrote.
bool is_trainer_event_file(const std::filesystem::path& path);

}  // namespace meshtrain::tensorboard
