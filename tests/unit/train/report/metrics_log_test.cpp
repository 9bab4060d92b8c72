// The metrics file: every record stamped with the writer's rank and the
// time, a resumed run's later records dropped.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meshtrain/train/report/metrics_log.hpp"

namespace meshtrain {
namespace {

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(MetricsLog, RecordsCarryRankAndTime) {
  const std::string path = (std::filesystem::temp_directory_path() / "meshtrain-metrics-log-test.jsonl").string();
  std::filesystem::remove(path);
  const double before = double(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count()) / 1e3;
  {
    MetricsLog log(path, -1, 3);
    log.write({{"step", 1}, {"loss", 2.5}});
    log.write({{"step", 2}, {"loss", 2.0}});
  }
  {
    MetricsLog resumed(path, 1, 3);  // a run resumed from step 1 drops step 2
    resumed.write({{"step", 2}, {"loss", 1.9}});
  }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["loss"], 1.9);
  for (const auto& r : lines) {
    EXPECT_EQ(r["rank"], 3);
    EXPECT_GE(r["time"].get<double>(), before - 1e-3);
    EXPECT_LT(r["time"].get<double>(), before + 60);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace meshtrain
