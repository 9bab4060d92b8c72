// plan/hardware.hpp's links_of_gpu: the links plan --config assumes between
// workers on GPUs, by the name the CUDA runtime gives the GPU.
#include <gtest/gtest.h>

#include <string>

#include "meshtrain/plan/hardware.hpp"

namespace meshtrain::plan {
namespace {

struct NamedGpu {
  const char* name;
  const char* intra;
  const char* inter;
};

TEST(LinksOfGpu, TakesTheFamilysLinksAndNoNvlinkForAPcieCard) {
  for (const NamedGpu& gpu : {NamedGpu{"NVIDIA H100 80GB HBM3", "nvlink4", "gpudirect-tcpxo"},
                              NamedGpu{"NVIDIA H200", "nvlink4", "gpudirect-rdma"},
                              NamedGpu{"NVIDIA A100-SXM4-40GB", "nvlink3", "ethernet-100g"},
                              NamedGpu{"NVIDIA B200", "nvlink5", "gpudirect-rdma"},
                              NamedGpu{"NVIDIA H100 PCIe", "pcie5", "gpudirect-tcpxo"},
                              NamedGpu{"NVIDIA A100-PCIE-40GB", "pcie4", "ethernet-100g"},
                              NamedGpu{"NVIDIA L4", "pcie4", "ethernet-100g"},
                              NamedGpu{"", "pcie4", "ethernet-100g"}}) {
    SCOPED_TRACE(gpu.name);
    const AssumedLinks links = links_of_gpu(gpu.name);
    ASSERT_NE(links.intra, nullptr);
    ASSERT_NE(links.inter, nullptr);
    EXPECT_EQ(links.intra->name, gpu.intra);
    EXPECT_EQ(links.inter->name, gpu.inter);
    EXPECT_FALSE(links.source.empty());
  }
  EXPECT_NE(links_of_gpu("NVIDIA L4").source.find("no profile"), std::string::npos);
  EXPECT_NE(links_of_gpu("NVIDIA H100 PCIe").source.find("no NVLink"), std::string::npos);
  EXPECT_DOUBLE_EQ(links_of_gpu("NVIDIA H100 80GB HBM3").intra->bandwidth_Bps, 450e9);
}

}  // namespace
}  // namespace meshtrain::plan
