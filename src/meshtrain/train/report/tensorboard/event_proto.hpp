#pragma once
// TensorBoard's Event protobuf, the data of each record of an event file,
// encoded by hand: only the fields meshtrain writes (tensorflow/core/util/
// event.proto and tensorflow/core/framework/summary.proto, proto3):
//   Event   { double wall_time = 1; int64 step = 2;
//             oneof what { string file_version = 3; Summary summary = 5; } }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; oneof value { float simple_value = 2; } }
// A field is a varint key (number << 3 | wire type) and its value: wire
// type 0 a varint, 1 eight bytes little-endian, 2 a varint length and the
// bytes, 5 four bytes little-endian.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain::tensorboard {

// The first event of a file: its format version, "brain.Event:2".
std::string encode_file_version_event(double wall_time);

// One scalar of a summary; TensorBoard's scalars are 32-bit floats.
struct Scalar {
  std::string tag;
  float value = 0;
};
// An event at `step` holding one summary of the given scalars.
std::string encode_scalar_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);

// What resuming needs from an event it reads back: its step (0 when the
// field is absent, as for the file-version event) and whether it holds a
// summary. nullopt: not a well-formed message.
struct EventHead {
  int64_t step = 0;
  bool has_summary = false;
};
std::optional<EventHead> decode_event_head(std::string_view bytes);

}  // namespace meshtrain::tensorboard
