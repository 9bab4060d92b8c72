#pragma once
// The parameter-server protocol: what workers and servers say to each other
// over their own TCP connections (not the job's collective transport, since
// workers come and go).
//
// Terms:
//   server step  pushes a server has applied so far; its schedule's lr and
//                its optimizer's step count follow it. Server 0's step is the
//                job's global step: the job ends when it reaches training.steps.
//   version      the server step of the parameters a worker pulled; sent back
//                with the gradient computed on them.
//   staleness    server step when a push is applied - the push's version:
//                how many other pushes landed in between.
//   clock        pushes of one worker rank that server 0 has applied. Server
//                0 keeps it per rank, so a restarted rank resumes its clock.
//
// A message is a fixed 40-byte header (raw little-endian struct; every
// process of a job runs one build) followed by payload_bytes of payload:
//   Hello    worker/server0 -> server  payload: HelloPayload; sent first
//   Welcome  server -> client          step = server step, clock = the rank's clock (server 0)
//   Pull     worker -> server          server 0 holds the reply while the rank's
//                                      clock is more than max_staleness ahead of
//                                      the slowest live worker's
//   Params   server -> worker          step = version; payload: the shard's floats
//   Push     worker -> server          step = version; payload: the shard's gradient
//   Ack      server -> worker          step = server step after applying
//   Done     server -> worker          the job is over: exit 0
//   Finish   server 0 -> server j      the job is over: send your final shard
//   Shard    server j -> server 0      step = server step; payload: params, then
//                                      each optimizer state buffer, each shard-sized
//   Error    either way                payload: a message; the connection ends
// Requests and replies alternate on a connection: one outstanding request.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshtrain::parallel::ps {

inline constexpr uint32_t kMagic = 0x53505448u;  // "HTPS" read as little-endian bytes

enum class Kind : uint8_t {
  Hello = 1, Welcome, Pull, Params, Push, Ack, Done, Finish, Shard, Error,
};

struct Header {
  uint32_t magic = kMagic;
  Kind kind = Kind::Error;
  uint8_t reserved[3] = {0, 0, 0};
  int32_t rank = -1;  // sender's world rank (requests); -1 in replies
  uint32_t reserved2 = 0;
  int64_t step = 0;
  int64_t clock = 0;
  uint64_t payload_bytes = 0;
};
static_assert(sizeof(Header) == 40);
inline constexpr size_t kHeaderBytes = sizeof(Header);

// Largest payload accepted: a shard of 2^32 floats with two optimizer states.
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{3} << 34;

struct Message {
  Header header;
  std::string payload;
};

std::string_view kind_name(Kind kind);

// The header at the start of `bytes` (>= kHeaderBytes), or nullopt with
// `error` set when the magic, kind or size is wrong: the stream is corrupt.
std::optional<Header> decode_header(std::string_view bytes, std::string& error);

// The header of a message with a payload of payload_bytes.
Header make_header(Kind kind, int32_t rank, int64_t step, int64_t clock, uint64_t payload_bytes);

std::string encode_message(Kind kind, int32_t rank, int64_t step, int64_t clock, std::string_view payload);

// Hello's payload: who is asking, with which secret, and the shard it expects
// (so a worker built from another model config is refused by name, not fed
// garbage).
struct HelloPayload {
  std::string token;
  std::string job_id;
  int32_t world_size = 0;
  uint64_t begin = 0, end = 0, flat_size = 0;  // the shard's flat range, the model's flat size
};
std::string encode_hello(const HelloPayload& hello);
std::optional<HelloPayload> decode_hello(std::string_view payload);

}  // namespace meshtrain::parallel::ps
