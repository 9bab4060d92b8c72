#include "meshtrain/comm/transport/shm/single_copy.hpp"

#include <cerrno>
#include <sys/uio.h>

namespace meshtrain::comm::shm {
namespace {

constexpr uint64_t kProbeWord = 0x4D45534843504D41ull;  // "MESHCPMA"
// Read by peers through process_vm_readv, never written: volatile keeps it
// an object in memory with this value.
volatile const uint64_t probe_word = kProbeWord;

}  // namespace

uint64_t probe_word_address() { return reinterpret_cast<uint64_t>(&probe_word); }

bool can_read_peer(pid_t pid, uint64_t probe_addr) {
  uint64_t value = 0;
  return read_peer(pid, probe_addr, &value, sizeof(value)) == 0 && value == kProbeWord;
}

int read_peer(pid_t pid, uint64_t remote, void* local, size_t bytes) {
  auto* out = static_cast<char*>(local);
  while (bytes > 0) {
    iovec to{out, bytes};
    iovec from{reinterpret_cast<void*>(remote), bytes};
    const ssize_t got = ::process_vm_readv(pid, &to, 1, &from, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;  // nothing readable at `remote`
    out += got;
    remote += uint64_t(got);
    bytes -= size_t(got);
  }
  return 0;
}

}  // namespace meshtrain::comm::shm
