#pragma once
// A TensorBoard event file: TFRecord-framed Event protobufs, the first one
// the file version, each later one appended with a single write() so a
// killed writer leaves at most a partial last record (readers stop there).
// Named as TensorFlow names them, which is how TensorBoard finds them:
//   <dir>/events.out.tfevents.<unix time>.<hostname>.<pid>.<n><suffix>
// n: 0, or the next free number if the name is taken. Readers take a run's
// files in name order as the order they were written in (TensorBoard's
// loaders drop a series' later points when an earlier step follows them),
// so a writer may ask for a name time after that of older files.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "meshtrain/checkpoint/durable_io.hpp"

namespace meshtrain::tensorboard {

// The suffix of an evaluator's files; the trainer rewrites only its own.
inline constexpr std::string_view kEvaluatorSuffix = ".evaluator";

class EventFileWriter {
 public:
  // Creates `dir` and a new file in it, and writes the file-version event;
  // the name's time is the current one, or name_time_after + 1 if that is
  // later. Throws IoError.
  explicit EventFileWriter(const std::filesystem::path& dir, std::string_view suffix = "",
                           int64_t name_time_after = -1);
  // Appends one event (an encoded Event message).
  void write_event(std::string_view event);
  const std::filesystem::path& path() const { return fd_.path(); }

 private:
  checkpoint::Fd fd_;
};

// Seconds since the Unix epoch, as an Event's wall_time.
double wall_time_now();

// The largest <unix time> in the names of the event files in `dir` that
// `keep` accepts; -1 if none.
int64_t newest_name_time(const std::filesystem::path& dir, bool (*keep)(const std::filesystem::path&));

}  // namespace meshtrain::tensorboard
