#pragma once
// Mesh setup: one authenticated TCP connection per pair of ranks.
//
// Every rank publishes its data listener as store key "tcp/addr/<rank>".
// The lower rank of each pair connects to the higher one, so rank r:
//   1. connects to every rank j > r (ascending) and sends its Hello;
//   2. accepts from every rank i < r, checking each Hello (token, job id,
//      world size, sender rank in [0, r) and not yet connected); any other
//      connection is logged and dropped and the listener keeps serving. Once
//      all lower ranks are in, it answers each with its own Hello;
//   3. reads the answering Hello from every rank j > r.
// Step 2 waits only on lower ranks' step 1, and step 3 only on higher ranks'
// step 2, so no rank waits on itself and setup cannot deadlock. Nothing is
// sent after a Hello until its answer arrives, so the handshake bytes never
// mix with data frames.
//
// When rank 0 finishes step 3, every rank has finished its step 1 (rank i's
// last connect is to rank world-1, which answers rank 0 only after accepting
// every lower rank), so no rank needs the store any more and rank 0 may close it.
#include <string>
#include <vector>

#include "meshtrain/comm/rendezvous/key_value_store.hpp"
#include "meshtrain/comm/transport/tcp/socket.hpp"

namespace meshtrain::comm::tcp {

struct MeshOptions {
  int rank = 0;
  int world_size = 1;
  std::string token;
  std::string job_id;
  Clock::time_point deadline;
  std::string congestion;  // for every data socket ("" = the kernel's default; congestion.hpp)
  std::string channel;     // TcpOptions::channel
};

// Returns one connected, non-blocking, tuned socket per rank (index = rank;
// this rank's slot is empty). Throws CommError naming the missing ranks.
std::vector<Fd> build_mesh(const MeshOptions& options, const Fd& listener, const Endpoint& advertise,
                           rendezvous::KeyValueStore& store);

std::string addr_key(int rank, const std::string& channel = "");  // "tcp/addr/<rank>", "tcp/<channel>/addr/<rank>"

}  // namespace meshtrain::comm::tcp
