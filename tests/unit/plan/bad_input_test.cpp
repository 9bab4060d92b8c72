// Bad plan input: a ConfigError naming the field, or a clear "does not fit
// anywhere" with the smallest configuration that would.
#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/plan/plan_report.hpp"
#include "plan_test_support.hpp"

namespace meshtrain::plan {
namespace {

std::vector<std::string> gpt(std::vector<std::string> extra) {
  std::vector<std::string> base = {"model.layers=12", "model.hidden=768", "model.heads=12", "model.seq_len=1024",
                                   "model.vocab=50257", "hardware.device=a100-80gb", "training.global_batch=64"};
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

void expect_error(const std::vector<std::string>& assignments, const std::string& fragment) {
  try {
    make_plan(testing::input_from(assignments));
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(BadInput, NamesTheField) {
  expect_error(gpt({"model.layers=-2"}), "model.layers: must be positive");
  expect_error(gpt({"model.hidden=0"}), "model.hidden: must be positive");
  expect_error(gpt({"model.heads=7"}), "model.heads: 7 heads do not divide the hidden size 768");
  expect_error(gpt({"hardware.nodes=0"}), "hardware.nodes: needs at least one node");
  expect_error(gpt({"hardware.devices_per_node=0"}), "hardware.devices_per_node: needs at least one device");
  expect_error(gpt({"training.global_batch=0"}), "training.global_batch: the global batch must be positive");
  expect_error(gpt({"training.global_batch=4"}), "cannot give each of the 8 devices a sample");
  expect_error(gpt({"hardware.memory_gb=-1"}), "hardware.memory_gb");
  expect_error(gpt({"training.precision=fp8"}), "training.precision: unknown precision 'fp8'");
  expect_error(gpt({"training.mfu=1.5"}), "training.mfu: must be in (0, 1]");
  expect_error(gpt({"model.top_k=3"}), "model.top_k");
  expect_error(gpt({"time.target_days=-1"}), "time.target_days");
  expect_error({"model.params=-5", "hardware.device=h100", "training.global_batch=8"}, "model.params: must be positive");
  expect_error(gpt({"hardware.device=tpu-v9"}), "unknown device 'tpu-v9' (known: a100-40gb");
  expect_error(gpt({"hardware.inter_link=carrier-pigeon"}), "unknown interconnect 'carrier-pigeon'");
  expect_error(gpt({"model.layers=twelve"}), "model.layers: expected a number, got 'twelve'");
  expect_error(gpt({"model.layers=2.5"}), "model.layers: expected a whole number");
  expect_error(gpt({"model.colour=blue"}), "model.colour: unknown key");
  expect_error({"model.params=1e9", "training.global_batch=8"}, "hardware.device: give a device profile");
}

TEST(BadInput, NothingFitsSaysSoAndNamesTheSmallestConfiguration) {
  // GPT-3 175B on one 16 GB TPU v5e chip: 2.8 TB of model state.
  const Plan plan = make_plan(testing::input_from(
      {"model.layers=96", "model.hidden=12288", "model.heads=96", "model.seq_len=2048", "model.vocab=50257",
       "hardware.device=tpu-v5e", "hardware.devices_per_node=1", "training.global_batch=16"}));
  const Recommendation& r = plan.recommendation;
  EXPECT_EQ(r.key(), "none");
  EXPECT_NE(r.reason.find("Does not fit anywhere"), std::string::npos) << r.reason;
  ASSERT_TRUE(r.has_smallest_fit);
  EXPECT_TRUE(r.smallest_fit.strategy.fits);
  const int devices = r.smallest_fit.devices_per_node * r.smallest_fit.nodes;
  // 16 bytes x 175 B parameters over 14.4 GB usable needs at least ~195 chips.
  EXPECT_GE(devices, 195);
  EXPECT_NE(r.reason.find("smallest configuration that fits"), std::string::npos);
}

TEST(BadInput, PlanFileErrorsNameTheFileAndKey) {
  const std::string path = ::testing::TempDir() + "/bad_plan.toml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("[model]\nlayers = 12\n[hardware]\ndevice = 'h100'\ncolour = 'blue'\n", f);
    std::fclose(f);
  }
  PlanValues values;
  try {
    read_plan_file(path, values);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": hardware.colour: unknown key"), std::string::npos) << e.what();
  }
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("[model\nlayers = 12\n", f);
    std::fclose(f);
  }
  EXPECT_THROW(read_plan_file(path, values), ConfigError);
  EXPECT_THROW(read_plan_file(path + ".missing", values), ConfigError);
}

}  // namespace
}  // namespace meshtrain::plan
