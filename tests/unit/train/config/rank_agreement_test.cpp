// Which settings the workers must share.
#include "meshtrain/train/config/rank_agreement.hpp"

#include <gtest/gtest.h>

#include <map>

namespace meshtrain {
namespace {

TEST(RankAgreement, SharesWhatDecidesTheNumbersButNotPerHostPaths) {
  JobConfig config;
  config.model.n_layer = 3;
  config.data.path = "/local/copy/on/this/host.txt";
  const auto settings = shared_settings(config);
  std::map<std::string, std::string> by_key(settings.begin(), settings.end());
  EXPECT_EQ(by_key.at("model.n_layer"), "3");
  for (const char* key : {"training.batch_size", "training.steps", "optimizer.lr", "parallel.zero_stage",
                          "parallel.micro_batches", "data.seed", "checkpoint.every"})
    EXPECT_TRUE(by_key.count(key)) << key;
  for (const char* key : {"data.path", "training.out_dir", "training.threads", "checkpoint.dir", "parallel.timeout_s",
                          "parallel.transport"})
    EXPECT_FALSE(by_key.count(key)) << key;
}

}  // namespace
}  // namespace meshtrain
