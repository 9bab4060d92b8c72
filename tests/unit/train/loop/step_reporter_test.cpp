// A finished step's reporting, shared by the synchronous trainer and the
// parameter-server worker: the last finite loss is the run's, throughput
// counts predictions of the global batch, its moving average starts at the
// first step, and a record reaches the metrics file.
#include "meshtrain/train/loop/step_reporter.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

namespace meshtrain {
namespace {

TEST(StepReporter, KeepsTheLastFiniteLossAndTheStep) {
  TrainSummary summary{.first_step = 4, .last_step = 4};
  StepReporter reporter(ThroughputUnit{}, summary, nullptr, nullptr);
  reporter.step_done(5, 2.5, 8, 1.0);
  EXPECT_EQ(summary.final_loss, 2.5);
  EXPECT_EQ(summary.last_step, 5);
  // A step of training.skip_steps computes no loss: the previous one stays.
  reporter.step_done(6, std::numeric_limits<float>::quiet_NaN(), 8, 1.0);
  EXPECT_EQ(summary.final_loss, 2.5);
  EXPECT_EQ(summary.last_step, 6);
  EXPECT_EQ(summary.first_step, 4);
}

TEST(StepReporter, ThroughputCountsPredictionsAndAveragesFromTheFirstStep) {
  TrainSummary summary;
  StepReporter reporter(throughput_unit(DataKind::Text, 16), summary, nullptr, nullptr);
  EXPECT_STREQ(reporter.unit().metric, "tokens_per_s");
  // 4 samples x 16 tokens in 0.5 s.
  EXPECT_DOUBLE_EQ(reporter.step_done(1, 1.0, 4, 0.5), 128.0);
  EXPECT_DOUBLE_EQ(reporter.throughput_ema(), 128.0);
  EXPECT_DOUBLE_EQ(reporter.step_done(2, 1.0, 4, 0.25), 256.0);
  EXPECT_DOUBLE_EQ(reporter.throughput_ema(), 0.9 * 128.0 + 0.1 * 256.0);
}

TEST(StepReporter, RecordsReachTheMetricsFile) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "meshtrain-step-reporter-test.jsonl";
  std::filesystem::remove(path);
  unsetenv("MESHTRAIN_HEARTBEAT_FILE");  // alive() is then the heartbeat's no-op
  {
    MetricsLog metrics(path.string(), -1, 0);
    TrainSummary summary;
    StepReporter reporter(ThroughputUnit{}, summary, &metrics, nullptr);
    reporter.record({{"step", 3}, {"loss", 1.5}});
    reporter.alive(3);
  }
  std::ifstream in(path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto rec = nlohmann::json::parse(line);
  EXPECT_EQ(rec["step"], 3);
  EXPECT_EQ(rec["loss"], 1.5);
  EXPECT_FALSE(std::getline(in, line));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace meshtrain
