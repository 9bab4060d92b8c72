// MESHTRAIN_SOCKET_IFNAME: an interface's address, or a clear error.
#include "meshtrain/comm/bootstrap/network_interface.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

TEST(NetworkInterface, LoopbackByNameAndByPrefix) {
  EXPECT_EQ(interface_address("lo"), "127.0.0.1");
  EXPECT_EQ(interface_address("l"), "127.0.0.1");  // a prefix, as NCCL_SOCKET_IFNAME
}

TEST(NetworkInterface, UnknownInterfaceNamesItAndWhatExists) {
  try {
    interface_address("nosuch9");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MESHTRAIN_SOCKET_IFNAME='nosuch9'"), std::string::npos) << what;
    EXPECT_NE(what.find("no such network interface"), std::string::npos) << what;
    EXPECT_NE(what.find("lo"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace meshtrain::comm
