#pragma once
// A TensorBoard event file: TFRecord-framed Event protobufs, the first one
// the file version, each later one appended with a single write() so a
// killed writer leaves at most a partial last record (readers stop there).
// Named as TensorFlow names them, which is how TensorBoard finds them:
//   <dir>/events.out.tfevents.<unix time>.<hostname>.<pid>.<n><suffix>
// n: 0, or the next free number if the name is taken.
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
  // Creates `dir` and a new file in it, and writes the file-version event.
  // Throws IoError.
  explicit EventFileWriter(const std::filesystem::path& dir, std::string_view suffix = "");
  // Appends one event (an encoded Event message).
  void write_event(std::string_view event);
  const std::filesystem::path& path() const { return fd_.path(); }

 private:
  checkpoint::Fd fd_;
};

// Seconds since the Unix epoch, as an Event's wall_time.
double wall_time_now();

}  // namespace meshtrain::tensorboard
