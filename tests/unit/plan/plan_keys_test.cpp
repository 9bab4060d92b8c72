// Plan files and flags: typed TOML values, flags over the file, profiles
// resolved with single figures overridden.
#include <gtest/gtest.h>

#include <cstdio>

#include "meshtrain/plan/plan_keys.hpp"

namespace meshtrain::plan {
namespace {

TEST(PlanKeys, FileThenFlagsThenProfileOverrides) {
  const std::string path = ::testing::TempDir() + "/plan.toml";
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("[model]\nlayers = 24\nhidden = 2048\nheads = 16\nseq_len = 2048\nvocab = 50257\nsparse = true\n"
             "[training]\nglobal_batch = 512\nmfu = 0.5\noptimizer = 'adamw'\n"
             "[hardware]\ndevice = 'H100'\nnodes = 2\ninter_link = 'ethernet-200g'\n",
             f);
  std::fclose(f);
  PlanValues values;
  read_plan_file(path, values);
  read_plan_flags({"--hardware.nodes=4", "--hardware.memory_gb=94", "--hardware.inter_gb_per_s=50"}, values);
  const PlanInput in = plan_input_from(values);
  EXPECT_EQ(in.model.kind, ShapeKind::Gpt);
  EXPECT_EQ(in.model.layers, 24);
  EXPECT_TRUE(in.sparse);
  EXPECT_EQ(in.global_batch, 512);
  EXPECT_DOUBLE_EQ(in.mfu, 0.5);
  EXPECT_EQ(in.optimizer, PlanOptimizer::Adam);  // adamw keeps Adam's state
  EXPECT_EQ(in.cluster.device.name, "h100");
  EXPECT_EQ(in.cluster.nodes, 4);  // the flag wins over the file
  EXPECT_EQ(in.cluster.devices_per_node, 8);
  EXPECT_DOUBLE_EQ(in.cluster.device.memory_bytes, 94e9);
  EXPECT_DOUBLE_EQ(in.cluster.device.peak_flops_16bit, 989e12);
  EXPECT_EQ(in.cluster.intra.name, "nvlink4");
  EXPECT_DOUBLE_EQ(in.cluster.inter.bandwidth_Bps, 50e9);  // ethernet-200g's 25 GB/s overridden
  EXPECT_TRUE(in.cluster.inter.per_node);
  in.validate();
}

TEST(PlanKeys, BareParameterCountMeansKindParams) {
  PlanValues values;
  read_plan_flags({"--model.params=7e9", "--hardware.device=custom", "--hardware.memory_gb=24",
                   "--hardware.tflops=100", "--training.global_batch=8"},
                  values);
  const PlanInput in = plan_input_from(values);
  EXPECT_EQ(in.model.kind, ShapeKind::Params);
  EXPECT_DOUBLE_EQ(in.model.parameters(), 7e9);
  EXPECT_DOUBLE_EQ(in.peak_flops(), 100e12);
  EXPECT_EQ(in.cluster.devices(), 1);
}

}  // namespace
}  // namespace meshtrain::plan
