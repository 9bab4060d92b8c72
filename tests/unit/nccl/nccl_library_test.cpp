// libnccl.so.2 is loaded on first use (nccl_library.hpp), not linked:
// loading it here, without a GPU or a driver, finds every function the
// communicators call.
#include <gtest/gtest.h>

#include <link.h>

#include <cstring>

#include "meshtrain/comm/nccl/nccl_library.hpp"

namespace meshtrain::comm::nccl {
namespace {

bool nccl_is_loaded() {
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && std::strstr(info->dlpi_name, "libnccl.so")) *static_cast<bool*>(out) = true;
        return 0;
      },
      &found);
  return found;
}

TEST(NcclLibrary, LoadsOnceWithEveryFunctionWithoutADriver) {
  const NcclLibrary& lib = nccl_library();
  EXPECT_TRUE(nccl_is_loaded());
  EXPECT_NE(lib.GetUniqueId, nullptr);
  EXPECT_NE(lib.CommSplit, nullptr);
  EXPECT_NE(lib.AllReduce, nullptr);
  EXPECT_NE(lib.GroupEnd, nullptr);
  EXPECT_STREQ(lib.GetErrorString(ncclSuccess), "no error");
  EXPECT_EQ(&nccl_library(), &lib);
}

}  // namespace
}  // namespace meshtrain::comm::nccl
