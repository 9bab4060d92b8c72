#include "meshtrain/comm/transport/tcp/mesh.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "meshtrain/comm/rendezvous/frame.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::tcp {
namespace {

using rendezvous::DecodeStatus;
using rendezvous::FrameType;

// A Hello is small: the token and 8 bytes plus the job id.
const rendezvous::FrameLimits kHelloLimits{1024, 8 + rendezvous::kMaxJobIdBytes,
                                           rendezvous::kFrameHeaderBytes + 1024 + 8 + rendezvous::kMaxJobIdBytes};

std::string hello_frame(const MeshOptions& o) {
  return rendezvous::encode_frame(FrameType::Hello, o.token,
                                  rendezvous::encode_hello_value({o.rank, o.world_size, o.job_id}));
}

// Why a Hello is unacceptable, or "" if it is fine. `expected_rank` < 0
// accepts any sender rank below ours.
std::string check_hello(const MeshOptions& o, const rendezvous::Frame& f, int expected_rank, int& sender) {
  if (f.type != FrameType::Hello) return "first frame is not a hello";
  if (!rendezvous::tokens_equal(f.key, o.token)) return "wrong token";
  const auto hello = rendezvous::parse_hello_value(f.value);
  if (!hello) return "malformed hello";
  if (hello->job_id != o.job_id) return "job id '" + hello->job_id + "' is not '" + o.job_id + "'";
  if (hello->world_size != o.world_size)
    return "world size " + std::to_string(hello->world_size) + " is not " + std::to_string(o.world_size);
  sender = hello->rank;
  const bool ok = expected_rank >= 0 ? sender == expected_rank : sender >= 0 && sender < o.rank;
  if (!ok) return "unexpected sender rank " + std::to_string(sender);
  return "";
}

std::string rank_list(const std::vector<Fd>& peers, int from, int to) {
  std::string out;
  for (int i = from; i < to; ++i)
    if (!peers[i].valid()) out += (out.empty() ? "" : ", ") + std::to_string(i);
  return out;
}

// A connection accepted in step 2 whose Hello has not fully arrived.
struct Pending {
  Fd fd;
  std::string peer;
  std::string in;
};

// Reads what a pending connection sent. Returns false while its Hello is
// incomplete; otherwise true with `why` empty (accept `sender`) or saying why
// the connection must be dropped.
bool take_hello(const MeshOptions& o, Pending& p, const std::vector<Fd>& peers, int& sender, std::string& why) {
  ReadStatus st = ReadStatus::Eof;
  try {
    st = read_some(p.fd.get(), p.in, o.deadline, p.peer);
  } catch (const CommError& e) {
    why = e.what();
    return true;
  }
  const auto r = rendezvous::decode_frame(p.in, kHelloLimits);
  if (r.status == DecodeStatus::Invalid) {
    why = r.error;
  } else if (st == ReadStatus::Eof) {
    why = "closed before finishing its hello";
  } else if (r.status == DecodeStatus::Incomplete) {
    return false;
  } else if (r.consumed != p.in.size()) {
    why = "sent data before the handshake finished";
  } else if (why = check_hello(o, r.frame, -1, sender); why.empty() && peers[sender].valid()) {
    why = "rank " + std::to_string(sender) + " is already connected";
  }
  return true;
}

// Step 2: accept until every lower rank has connected with a good Hello.
void accept_lower_ranks(const MeshOptions& o, const Fd& listener, std::vector<Fd>& peers) {
  const std::string me = "rank " + std::to_string(o.rank);
  const auto start = Clock::now();
  std::vector<Pending> pending;
  int missing = o.rank;
  while (missing > 0) {
    std::vector<pollfd> fds{{listener.get(), POLLIN, 0}};
    for (const Pending& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    if (poll_until(fds.data(), fds.size(), o.deadline) == 0)
      throw CommError(me + ": timed out after " + std::to_string(ms_between(start, Clock::now())) +
                      " ms waiting for rank(s) " + rank_list(peers, 0, o.rank) + " to connect");
    for (size_t i = pending.size(); i-- > 0;) {  // backwards, so erasing keeps indices valid
      if (!fds[i + 1].revents) continue;
      Pending& p = pending[i];
      int sender = -1;
      std::string why;
      if (!take_hello(o, p, peers, sender, why)) continue;
      if (why.empty()) {
        peers[sender] = std::move(p.fd);
        --missing;
      } else {
        log_line("warning", me + " dropped a data connection from " + p.peer + ": " + why);
      }
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (fds[0].revents) {
      for (;;) {
        Fd fd(accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd.valid()) break;
        tune_data_socket(fd.get(), o.congestion);
        std::string peer = peer_description(fd.get());
        pending.push_back({std::move(fd), std::move(peer), {}});
      }
    }
  }
  // Answer only now that every lower rank is in (see mesh.hpp).
  for (int i = 0; i < o.rank; ++i) write_all(peers[i].get(), hello_frame(o), o.deadline, "rank " + std::to_string(i));
}

// Step 3: the answer from a higher rank, read exactly (data may follow it).
void read_answer(const MeshOptions& o, const Fd& fd, int peer) {
  const std::string me = "rank " + std::to_string(o.rank);
  const std::string them = "rank " + std::to_string(peer);
  std::string in;
  for (;;) {
    const auto r = rendezvous::decode_frame(in, kHelloLimits);
    if (r.status == DecodeStatus::Invalid) throw CommError(me + ": bad handshake from " + them + ": " + r.error);
    if (r.status == DecodeStatus::Complete) {
      int sender = -1;
      if (std::string why = check_hello(o, r.frame, peer, sender); !why.empty())
        throw CommError(me + ": bad handshake from " + them + ": " + why);
      return;
    }
    switch (read_some(fd.get(), in, o.deadline, them, r.needed - in.size())) {
      case ReadStatus::Data: break;
      case ReadStatus::Eof:
        throw CommError(me + ": " + them + " closed the connection during the handshake " +
                        "(token, job id or world size mismatch? see its log)");
      case ReadStatus::Timeout:
        throw CommError(me + ": timed out waiting for " + them + " to answer the handshake");
    }
  }
}

}  // namespace

std::string addr_key(int rank, const std::string& channel) {
  return (channel.empty() ? "tcp/addr/" : "tcp/" + channel + "/addr/") + std::to_string(rank);
}

std::vector<Fd> build_mesh(const MeshOptions& o, const Fd& listener, const Endpoint& advertise,
                           rendezvous::KeyValueStore& store) {
  const std::string me = "rank " + std::to_string(o.rank);
  std::vector<Fd> peers(static_cast<size_t>(o.world_size));
  store.set(addr_key(o.rank, o.channel), advertise.str());

  for (int j = o.rank + 1; j < o.world_size; ++j) {  // step 1
    std::string addr;
    try {
      addr = store.get(addr_key(j, o.channel));
    } catch (const CommError& e) {
      throw CommError(me + ": rank " + std::to_string(j) + " did not publish its data address (" + e.what() + ")");
    }
    const std::string them = "rank " + std::to_string(j);
    peers[j] = connect_with_retry(parse_endpoint(addr), o.deadline, them);
    tune_data_socket(peers[j].get(), o.congestion);
    write_all(peers[j].get(), hello_frame(o), o.deadline, them);
  }
  accept_lower_ranks(o, listener, peers);                                     // step 2
  for (int j = o.rank + 1; j < o.world_size; ++j) read_answer(o, peers[j], j);  // step 3
  return peers;
}

}  // namespace meshtrain::comm::tcp
