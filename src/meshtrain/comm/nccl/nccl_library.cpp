#include "meshtrain/comm/nccl/nccl_library.hpp"

#include <dlfcn.h>

#include <string>

#include "meshtrain/comm/nccl/environment.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::nccl {
namespace {

constexpr const char* kLibrary = "libnccl.so.2";

template <class F>
void find(void* handle, F& function, const char* name) {
  function = reinterpret_cast<F>(dlsym(handle, name));
  if (function) return;
  const char* why = dlerror();
  throw CommError(std::string(kLibrary) + " has no " + name + " (NCCL 2.18 or newer is needed): " +
                  (why ? why : "not found"));
}

NcclLibrary load() {
  set_environment();  // before NCCL reads its settings (environment.hpp)
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw CommError(std::string("NCCL could not be loaded: ") + dlerror() +
                    " (install NCCL, e.g. pip's nvidia-nccl-cu13, and put its lib/ on LD_LIBRARY_PATH)");
  NcclLibrary lib;
  find(handle, lib.GetUniqueId, "ncclGetUniqueId");
  find(handle, lib.GetVersion, "ncclGetVersion");
  find(handle, lib.CommInitRank, "ncclCommInitRank");
  find(handle, lib.CommSplit, "ncclCommSplit");
  find(handle, lib.CommUserRank, "ncclCommUserRank");
  find(handle, lib.CommDestroy, "ncclCommDestroy");
  find(handle, lib.CommAbort, "ncclCommAbort");
  find(handle, lib.CommGetAsyncError, "ncclCommGetAsyncError");
  find(handle, lib.GetErrorString, "ncclGetErrorString");
  find(handle, lib.GetLastError, "ncclGetLastError");
  find(handle, lib.AllReduce, "ncclAllReduce");
  find(handle, lib.AllGather, "ncclAllGather");
  find(handle, lib.ReduceScatter, "ncclReduceScatter");
  find(handle, lib.Broadcast, "ncclBroadcast");
  find(handle, lib.Send, "ncclSend");
  find(handle, lib.Recv, "ncclRecv");
  find(handle, lib.GroupStart, "ncclGroupStart");
  find(handle, lib.GroupEnd, "ncclGroupEnd");
  return lib;  // the handle stays open for the process's life
}

}  // namespace

const NcclLibrary& nccl_library() {
  static const NcclLibrary lib = load();  // a failed load throws, and the next call tries again
  return lib;
}

std::string nccl_version() {
  int code = 0;
  if (nccl_library().GetVersion(&code) != ncclSuccess) return "of an unknown version";
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

}  // namespace meshtrain::comm::nccl
