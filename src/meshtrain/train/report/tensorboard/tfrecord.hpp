#pragma once
// TFRecord framing, the container of TensorBoard event files. A file is a
// sequence of records, each
//   uint64 length | uint32 masked CRC-32C of the 8 length bytes | data | uint32 masked CRC-32C of data
// with integers little-endian (crc32c.hpp has the mask). Readers stop at the
// first record that is short or fails a CRC.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain::tensorboard {

// One record's bytes: the frame around `data`.
std::string frame_record(std::string_view data);

// The records at the start of `bytes` that are whole and check, as views
// into `bytes`; valid_bytes: where the first that does not begins (the
// partial last record of a writer killed mid-write, or damage), else the size.
struct RecordScan {
  std::vector<std::string_view> records;
  size_t valid_bytes = 0;
};
RecordScan scan_records(std::string_view bytes);

}  // namespace meshtrain::tensorboard
