// The job config resolved into each part's settings.
#include "meshtrain/train/config/section_configs.hpp"

#include <gtest/gtest.h>

#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain {
namespace {

TEST(SectionConfigs, StepSettingsScaleTheLrForTheGlobalBatchAndShardOnlyOverSeveralWays) {
  JobConfig c;
  apply_overrides(c, {"--optimizer.name=lamb", "--optimizer.lr=0.01", "--optimizer.grad_clip=0.5",
                      "--schedule.scale_rule=linear", "--schedule.reference_batch=8", "--training.batch_size=8",
                      "--parallel.data=allreduce", "--parallel.zero_stage=2", "--parallel.micro_batches=2",
                      "--parallel.bucket_mb=2"});
  const StepSettings four = to_step_settings(c, 4);
  EXPECT_EQ(four.optimizer.kind, OptimizerKind::Lamb);
  EXPECT_DOUBLE_EQ(four.base_lr, 0.04);  // 32 samples per step, tuned for 8
  EXPECT_EQ(four.grad_clip, 0.5);
  EXPECT_EQ(four.micro_batches, 2);
  EXPECT_EQ(four.zero_stage, 2);
  EXPECT_EQ(four.bucket_bytes, size_t{2} << 20);
  EXPECT_EQ(four.schedule.total_steps, c.training.steps);
  const StepSettings one = to_step_settings(c, 1);
  EXPECT_EQ(one.zero_stage, 0);  // nothing to shard
  EXPECT_DOUBLE_EQ(one.base_lr, 0.01);
}

TEST(SectionConfigs, CheckpointSettingsCarryTheConfigAsCheckpointsStoreIt) {
  JobConfig c;
  apply_overrides(c, {"--training.out_dir=runs/x", "--checkpoint.keep=5", "--checkpoint.async=false"});
  const CheckpointSettings s = to_checkpoint_settings(c);
  EXPECT_EQ(s.root, "runs/x/checkpoints");
  EXPECT_EQ(s.keep, 5);
  EXPECT_FALSE(s.async);
  EXPECT_EQ(s.timeout_s, c.parallel.timeout_s);
  EXPECT_EQ(s.config_toml, job_config_to_toml(c));
}

}  // namespace
}  // namespace meshtrain
