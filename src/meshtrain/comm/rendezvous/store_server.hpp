#pragma once
// The rendezvous store: a small key-value server that rank 0 hosts so the
// ranks of a job can find each other (torch's TCPStore plays the same role).
//
// Protocol (frames as in frame.hpp): a client opens a connection and sends
// Hello {token, rank, world size, job id}. A wrong token or job id is logged
// and the connection dropped; nothing else about the job changes, so a stray
// or hostile client cannot disturb the ranks. An authenticated client whose
// rank or world size contradicts the job (rank outside [0, world), a world
// size other than the store's, a rank already connected) *fails the job*: the
// store logs it, replies Error to that client, and answers every pending and
// later request with the same Error, so all ranks stop with one clear message
// instead of waiting for a timeout. Otherwise Hello gets Ok, and the client
// may Set keys (reply Ok) and Get them (the reply waits until the key is set).
//
// One thread serves every connection with poll(); requests are tiny and rare
// (a few per rank per job), so nothing more is needed.
#include <cstdint>
#include <memory>
#include <string>

#include "meshtrain/comm/rendezvous/frame.hpp"

namespace meshtrain::comm::rendezvous {

struct StoreOptions {
  std::string bind_addr = "127.0.0.1";  // loopback unless an address is configured
  uint16_t port = 29500;                // 0 = ephemeral; read it back with port()
  std::string token;                    // per-job secret every client must present
  std::string job_id;
  int world_size = 1;
  FrameLimits limits;
};

class TcpStore {
 public:
  // Binds and listens before returning (a port in use is CommError
  // "port 29500 on 127.0.0.1 is in use"), then serves on a background thread.
  explicit TcpStore(StoreOptions options);
  ~TcpStore();  // stops the thread and closes every connection
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  uint16_t port() const;
  // The error that failed the job (see above), or "" while there is none.
  std::string failure() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace meshtrain::comm::rendezvous
