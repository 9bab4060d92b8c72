// libFuzzer target for the rendezvous/handshake frame decoder
// (src/meshtrain/comm/rendezvous/frame.hpp): any bytes must decode to
// Complete, Incomplete or Invalid with the invariants below, never crash,
// read out of bounds or allocate without limit.
//
//   CXX=clang++ cmake -S fuzz -B build-fuzz -G Ninja && ninja -C build-fuzz
//   build-fuzz/fuzz_frame_decoder -max_total_time=60 fuzz/corpus
//
// The deterministic twin that runs in CI is tests/unit/comm/rendezvous/frame_decoder_test.cpp.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "meshtrain/comm/rendezvous/frame.hpp"

using namespace meshtrain::comm::rendezvous;

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// Decodes `stream` frame by frame, as a connection's read buffer is.
void decode_stream(std::string_view stream, const FrameLimits& limits) {
  while (!stream.empty()) {
    const DecodeResult r = decode_frame(stream, limits);
    if (r.status == DecodeStatus::Invalid) {
      require(!r.error.empty());
      return;
    }
    if (r.status == DecodeStatus::Incomplete) {
      require(r.needed > stream.size() && r.needed <= limits.max_frame);
      return;
    }
    require(r.consumed > 0 && r.consumed <= stream.size() && r.consumed <= limits.max_frame);
    require(r.frame.key.size() <= limits.max_key && r.frame.value.size() <= limits.max_value);
    require(encode_frame(r.frame.type, r.frame.key, r.frame.value) == stream.substr(0, r.consumed));
    if (r.frame.type == FrameType::Hello) {
      if (auto hello = parse_hello_value(r.frame.value)) require(hello->job_id.size() <= kMaxJobIdBytes);
      (void)tokens_equal(r.frame.key, "token");
    }
    stream.remove_prefix(r.consumed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  decode_stream(bytes, FrameLimits{});
  decode_stream(bytes, FrameLimits{16, 64, kFrameHeaderBytes + 16 + 40});
  // Frames built from the input, so the fuzzer reaches Complete often.
  if (size >= 2) {
    const size_t split = data[0] % (size - 1) + 1;
    const std::string framed = encode_frame(static_cast<FrameType>(1 + data[1] % 6), bytes.substr(2, split),
                                            bytes.substr(2 + std::min(split, size - 2)));
    decode_stream(framed + std::string(bytes), FrameLimits{});
  }
  return 0;
}
