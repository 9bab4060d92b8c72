#pragma once
// libnccl.so.2, loaded the first time a job or test uses NCCL (dlopen),
// not when the program starts: a binary with NCCL's communicators inside
// still runs on machines without NCCL, where the host's collectives serve,
// and only a job that asks for NCCL there stops, saying what is missing.
// The functions are NCCL's own (nccl.h), found by name.
#include <nccl.h>

#include <string>

namespace meshtrain::comm::nccl {

struct NcclLibrary {
  decltype(&::ncclGetUniqueId) GetUniqueId;
  decltype(&::ncclCommInitRank) CommInitRank;
  decltype(&::ncclCommSplit) CommSplit;
  decltype(&::ncclCommUserRank) CommUserRank;
  decltype(&::ncclCommDestroy) CommDestroy;
  decltype(&::ncclCommAbort) CommAbort;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&::ncclGetErrorString) GetErrorString;
  decltype(&::ncclGetLastError) GetLastError;
  decltype(&::ncclGetVersion) GetVersion;
  decltype(&::ncclAllReduce) AllReduce;
  decltype(&::ncclAllGather) AllGather;
  decltype(&::ncclReduceScatter) ReduceScatter;
  decltype(&::ncclBroadcast) Broadcast;
  decltype(&::ncclSend) Send;
  decltype(&::ncclRecv) Recv;
  decltype(&::ncclGroupStart) GroupStart;
  decltype(&::ncclGroupEnd) GroupEnd;
};

// Loads the library once (thread-safe) and returns its functions; throws
// CommError naming the library and the loader's reason where it cannot be
// loaded or lacks a function (an NCCL older than 2.18, which added
// ncclCommSplit).
const NcclLibrary& nccl_library();

// The loaded library's version, "2.28.9" (for the job's log: which NCCL
// ran decides, e.g., whether it knows NCCL_LAUNCH_ORDER_IMPLICIT).
std::string nccl_version();

}  // namespace meshtrain::comm::nccl
