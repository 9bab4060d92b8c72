#pragma once
// Single-copy transfers: the receiver reads a large message straight out of
// the sender's memory with process_vm_readv (Linux cross-memory attach, as
// OpenMPI's CMA path does), instead of the sender copying it into slots and
// the receiver copying it out again.
//
// What it buys is not fewer bytes through memory (the slots stay in cache)
// but half the copying work per rank and decoupled peers: a sender publishes
// a descriptor and goes on with its own receives; the receiver reads at its
// own pace, while a slot ring stalls as soon as the peer on the other end
// is slow or descheduled for a moment.
//
// Who may: process_vm_readv needs ptrace access to the target (same user,
// and Yama's ptrace_scope or a seccomp filter may forbid it). So each rank
// probes at join whether it can read every peer's probe word and publishes
// the answer in its RankEntry; a sender uses a descriptor only for a
// receiver that said yes, and every other message goes through the slots.
// The choice is made per message by the sender and carried in the slot, so
// both sides always agree.
#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace meshtrain::comm::shm {

// A receiver reads a message this much per call (one piece per progress
// pass keeps its other ops moving): a copied one straight into place, a
// reduced one through a bounce buffer of this size, which stays in L2.
// Measured at 2 ranks, 32-256 MiB: 16 KiB pieces ran ~20% slower than
// 64 KiB, 256 KiB and 512 KiB ~10% faster (bench/RESULTS.md, run 7).
inline constexpr size_t kSingleCopyPieceBytes = size_t(512) << 10;

// Address of this process's probe word (its value is kProbeWord).
uint64_t probe_word_address();

// True if this process can read `pid`'s probe word at `probe_addr`.
bool can_read_peer(pid_t pid, uint64_t probe_addr);

// Copies `bytes` from address `remote` of process `pid` into `local`.
// Returns 0, or the errno of the failed read (ESRCH: the process is gone).
int read_peer(pid_t pid, uint64_t remote, void* local, size_t bytes);

}  // namespace meshtrain::comm::shm
