#pragma once
// The Reduction Server protocol between n workers and R reducers that share
// one transport (workers and reducers are ranks of the same world).
//
// Terms:
//   segment  the buffer is cut into R segments (segment_bounds); reducer j
//            owns segment j of every all-reduce.
//   chunk    a segment travels as chunks of at most chunk_bytes, so a reducer
//            returns chunk c - D while chunk c is still arriving.
//   in flight D: how many chunks a worker sends ahead of the sums it has
//            back. D > 1 is meant to hide a long round trip (a reducer's
//            reply need not arrive before the next chunk goes out); on the
//            emulated network of bench/ (no added latency) more data in
//            flight only lengthened each exchange's tail, so D = 1 is the
//            default (bench/RESULTS.md).
//   request  a fixed-size header a worker sends each reducer before the data
//            of one all-reduce; it names the operation, so the reducer can
//            check that every worker asks for the same thing (mismatched
//            sizes across workers are an error, never a silent corruption).
//
// One all-reduce, seen from worker w:
//   1. send the request to every reducer;
//   2. for c = 0 .. C + D - 1: in one exchange, send chunk c of segment j to
//      reducer j (for every j) and receive the reduced chunk c - D back.
// Each worker sends and receives every byte of its buffer once, in two
// latency steps; a ring needs 2(n-1)/n of the bytes and 2(n-1) steps.
//
// The reducer sums the n contributions of a chunk in worker order (w = 0, 1,
// ...), whatever the arrival order, so results are bitwise deterministic,
// and every worker gets the same bytes back.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "meshtrain/comm/collectives/algorithm.hpp"
#include "meshtrain/comm/reduce.hpp"

namespace meshtrain::comm::reduction_server {

inline constexpr uint32_t kRequestMagic = 0x5244534d;  // "MSDR"
inline constexpr int kMaxInFlight = 8;
// 256 KiB: on the emulated 1 Gbit/s network (bench/RESULTS.md) with cubic
// congestion control it beat 512 KiB and 1 MiB (596-600 ms against 611-628
// and 621-748 for 64 MiB); 1 MiB was best only under BBR, which the TCP
// transport no longer asks for (socket.hpp: congestion control).
inline constexpr size_t kDefaultChunkBytes = size_t{256} << 10;

enum class RequestKind : uint8_t { AllReduce = 1, Shutdown = 2 };

// Sent as raw bytes over the transport (all ranks of a job run one build).
struct Request {
  uint32_t magic = kRequestMagic;
  RequestKind kind = RequestKind::AllReduce;
  uint8_t dtype = 0;  // DataType
  uint8_t op = 0;     // ReduceKind
  uint8_t in_flight = 1;  // D, 1..kMaxInFlight
  uint64_t sequence = 0;     // all-reduces so far from this worker
  uint64_t count = 0;        // elements of the whole buffer
  uint64_t chunk_bytes = 0;  // chunk size the worker uses
};
static_assert(sizeof(Request) == 32);

// "3 f32 elements, sum, request 7"; for messages.
std::string describe(const Request& request);

// Where the reducers are and how data is chunked.
struct Topology {
  std::span<const int> workers;   // global ranks of the workers, in worker order
  std::span<const int> reducers;  // global ranks of the reducers, in segment order
  size_t chunk_bytes = kDefaultChunkBytes;
  int in_flight = 1;  // D above (bench/RESULTS.md: 1 beat 2 and 3 on the emulated network)
};

}  // namespace meshtrain::comm::reduction_server
