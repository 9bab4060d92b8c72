#include "meshtrain/core/device.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

TEST(Device, ParsesTheThreeForms) {
  EXPECT_EQ(parse_device("cpu").kind, DeviceKind::Cpu);
  const DeviceRequest any = parse_device("cuda");
  EXPECT_EQ(any.kind, DeviceKind::Cuda);
  EXPECT_FALSE(any.index_given);
  const DeviceRequest third = parse_device("cuda:3");
  EXPECT_EQ(third.kind, DeviceKind::Cuda);
  EXPECT_TRUE(third.index_given);
  EXPECT_EQ(third.index, 3);
}

TEST(Device, RejectsOtherValuesNamingThem) {
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:1x", "cuda:1024", "cuda: 1", "cpu:0"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos) << e.what();
    }
  }
}

TEST(Device, CudaTakesTheLocalRankUnlessANumberIsGiven) {
  EXPECT_EQ(resolve_device(parse_device("cuda"), 5), (Device{DeviceKind::Cuda, 5}));
  EXPECT_EQ(resolve_device(parse_device("cuda:1"), 5), (Device{DeviceKind::Cuda, 1}));
  EXPECT_TRUE(resolve_device(parse_device("cpu"), 5).is_cpu());
  EXPECT_EQ(device_name(resolve_device(parse_device("cuda"), 2)), "cuda:2");
  EXPECT_EQ(device_name(Device{}), "cpu");
}

}  // namespace
}  // namespace meshtrain
