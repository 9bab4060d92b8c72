// NCCL's settings that meshtrain sets before any thread starts
// (comm/nccl/environment.hpp): the launch order across a GPU's
// communicators, unless the user set it.
#include "meshtrain/comm/nccl/environment.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace meshtrain::comm::nccl {
namespace {

constexpr const char* kLaunchOrder = "NCCL_LAUNCH_ORDER_IMPLICIT";

// Restores the variable as it was when the test began.
class SavedVariable {
 public:
  SavedVariable() {
    if (const char* v = ::getenv(kLaunchOrder)) value_ = v, set_ = true;
  }
  ~SavedVariable() {
    if (set_)
      ::setenv(kLaunchOrder, value_.c_str(), 1);
    else
      ::unsetenv(kLaunchOrder);
  }

 private:
  std::string value_;
  bool set_ = false;
};

TEST(NcclEnvironment, SetsTheImplicitLaunchOrderAndKeepsAUsersValue) {
  SavedVariable saved;
  ::unsetenv(kLaunchOrder);
  set_environment();
  ASSERT_NE(::getenv(kLaunchOrder), nullptr);
  EXPECT_STREQ(::getenv(kLaunchOrder), "1");
  ::setenv(kLaunchOrder, "0", 1);
  set_environment();
  EXPECT_STREQ(::getenv(kLaunchOrder), "0");
}

}  // namespace
}  // namespace meshtrain::comm::nccl
