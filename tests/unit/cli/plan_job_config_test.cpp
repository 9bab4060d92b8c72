#include "meshtrain/cli/plan_job_config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain::cli {
namespace {

// A tiny GPT on two small custom devices: the planner picks data parallelism.
plan::PlanValues tiny_values(int devices = 2) {
  plan::PlanValues v;
  auto put = [&](const char* key, std::string text) { v[key] = {std::move(text), "test"}; };
  put("model.layers", "2");
  put("model.hidden", "32");
  put("model.heads", "2");
  put("model.seq_len", "32");
  put("model.vocab", "256");
  put("training.global_batch", "8");
  put("hardware.device", "custom");
  put("hardware.memory_gb", "1");
  put("hardware.tflops", "0.1");
  put("hardware.devices_per_node", std::to_string(devices));
  return v;
}

plan::Plan tiny_plan(int devices = 2) { return plan::make_plan(plan::plan_input_from(tiny_values(devices))); }

// The plan with its recommendation replaced by `key` at `layout`, with
// `micro` samples per micro-batch (as the planner would fill it in).
plan::Plan recommending(plan::Plan p, const std::string& key, plan::Layout layout, int64_t micro) {
  plan::StrategyEstimate* e = nullptr;
  const plan::StrategyKind kind = *parse_enum<plan::StrategyKind>(key);
  for (plan::StrategyEstimate& s : p.strategies)
    if (s.kind == kind) e = &s;
  if (!e) {
    p.strategies.push_back({});
    e = &p.strategies.back();
    e->kind = kind;
  }
  e->applicable = e->fits = true;
  e->layout = layout;
  const int64_t replica = (p.input.global_batch + layout.dp - 1) / layout.dp;
  e->micro_batch = micro;
  e->accumulation = (replica + micro - 1) / micro;
  p.recommendation.strategy = kind;
  return p;
}

// The emitted text parses back into the same job.
void expect_round_trip(const EmittedJob& job) {
  const std::string text = emitted_config_text(job, "job.toml");
  EXPECT_EQ(job_config_to_toml(parse_job_config(text, "emitted")), job_config_to_toml(job.config));
}

TEST(JobFromPlan, FreshJobRunsTheRecommendedDataParallelism) {
  const plan::Plan p = tiny_plan();
  ASSERT_TRUE(p.recommendation.key() == "dp-ring" || p.recommendation.key() == "dp-tree") << p.recommendation.key();
  const EmittedJob job = job_from_plan(p, nullptr);
  const JobConfig& c = job.config;
  EXPECT_EQ(c.model.kind, ModelKind::Gpt);
  EXPECT_EQ(c.model.n_layer, 2);
  EXPECT_EQ(c.model.n_embd, 32);
  EXPECT_EQ(c.model.n_head, 2);
  EXPECT_EQ(c.model.block_size, 32);
  EXPECT_EQ(c.model.vocab_size, 256);
  EXPECT_EQ(c.data.kind, DataKind::Text);
  EXPECT_EQ(c.data.path, JobConfig{}.data.path);
  EXPECT_EQ(c.parallel.data, DataParallelism::AllReduce);
  EXPECT_EQ(c.parallel.workers, 2);
  EXPECT_EQ(c.parallel.all_reduce,
            p.recommendation.key() == "dp-ring" ? comm::AllReduceAlgorithm::Ring : comm::AllReduceAlgorithm::Tree);
  EXPECT_EQ(c.training.batch_size * c.parallel.workers, 8);  // the plan's global batch
  EXPECT_EQ(c.parallel.tensor, 1);
  EXPECT_EQ(c.parallel.pipeline, 1);
  EXPECT_EQ(c.parallel.zero_stage, 0);
  expect_round_trip(job);
}

TEST(JobFromPlan, OneDeviceIsOneWorkerWithoutDataParallelism) {
  const plan::Plan p = tiny_plan(1);
  ASSERT_EQ(p.recommendation.key(), "single");
  const EmittedJob job = job_from_plan(p, nullptr);
  EXPECT_EQ(job.config.parallel.data, DataParallelism::None);
  EXPECT_EQ(job.config.parallel.workers, 1);
  EXPECT_EQ(job.config.training.batch_size, 8);
  expect_round_trip(job);
}

TEST(JobFromPlan, EveryStrategySetsItsParallelKeys) {
  const plan::Plan base = tiny_plan(4);
  {
    const JobConfig c = job_from_plan(recommending(base, "zero-2", {.dp = 4}, 2), nullptr).config;
    EXPECT_EQ(c.parallel.zero_stage, 2);
    EXPECT_EQ(c.parallel.data, DataParallelism::AllReduce);
    EXPECT_EQ(c.parallel.workers, 4);
    EXPECT_EQ(c.training.batch_size, 2);
    EXPECT_EQ(c.parallel.micro_batches, 1);
  }
  {
    // Micro-batches of 1 for the pipeline: the whole batch in 8.
    const EmittedJob job = job_from_plan(recommending(base, "tp-pp-dp", {.dp = 1, .tp = 2, .pp = 2}, 1), nullptr);
    const JobConfig& c = job.config;
    EXPECT_EQ(c.parallel.data, DataParallelism::None);
    EXPECT_EQ(c.parallel.workers, 4);
    EXPECT_EQ(c.parallel.tensor, 2);
    EXPECT_EQ(c.parallel.pipeline, 2);
    EXPECT_EQ(c.parallel.schedule, parallel::pipeline::ScheduleKind::OneFOneB);
    EXPECT_EQ(c.training.batch_size, 8);
    EXPECT_EQ(c.parallel.micro_batches, 8);
    expect_round_trip(job);
  }
  {
    const JobConfig c = job_from_plan(recommending(base, "dp-reduction-server", {.dp = 4}, 2), nullptr).config;
    EXPECT_EQ(c.parallel.all_reduce, comm::AllReduceAlgorithm::ReductionServer);
    EXPECT_EQ(c.parallel.data, DataParallelism::AllReduce);
  }
  {
    // A parameter-server worker pushes whole batches.
    const JobConfig c = job_from_plan(recommending(base, "parameter-server", {.dp = 4}, 1), nullptr).config;
    EXPECT_EQ(c.parallel.data, DataParallelism::ParameterServer);
    EXPECT_EQ(c.parallel.micro_batches, 1);
    EXPECT_EQ(c.training.batch_size, 2);
  }
}

TEST(JobFromPlan, ExpertParallelismForAMixtureOfExperts) {
  plan::PlanValues v = tiny_values(4);
  v["model.experts"] = {"4", "test"};
  v["model.top_k"] = {"2", "test"};
  const plan::Plan p = recommending(plan::make_plan(plan::plan_input_from(v)), "ep-dp", {.dp = 4, .ep = 2}, 2);
  const EmittedJob job = job_from_plan(p, nullptr);
  EXPECT_EQ(job.config.model.n_expert, 4);
  EXPECT_EQ(job.config.model.top_k, 2);
  EXPECT_EQ(job.config.parallel.expert, 2);
  EXPECT_EQ(job.config.parallel.workers, 4);
  EXPECT_EQ(job.config.parallel.data, DataParallelism::AllReduce);
  expect_round_trip(job);
}

TEST(JobFromPlan, ABaseJobKeepsEverythingButTheLayoutAndBatch) {
  JobConfig base;
  base.model.n_layer = 2;
  base.model.n_embd = 32;
  base.model.n_head = 2;
  base.data.path = "corpus.txt";
  base.training.steps = 7;
  base.training.out_dir = "runs/mine";
  base.optimizer.lr = 0.123;
  base.parallel.bucket_mb = 3;
  base.parallel.pipeline = 2;
  base.parallel.workers = 2;
  base.parallel.schedule = parallel::pipeline::ScheduleKind::ZeroBubble;
  base.parallel.micro_batches = 4;
  base.training.batch_size = 8;
  validate_job_config(base);

  const EmittedJob job = job_from_plan(tiny_plan(), &base);
  JobConfig expected = base;
  expected.parallel = job.config.parallel;
  expected.training.batch_size = job.config.training.batch_size;
  EXPECT_EQ(job_config_to_toml(job.config), job_config_to_toml(expected));
  EXPECT_EQ(job.config.parallel.bucket_mb, 3);
  EXPECT_EQ(job.config.parallel.pipeline, 1);
  EXPECT_EQ(job.config.parallel.schedule, parallel::pipeline::ScheduleKind::OneFOneB);
  EXPECT_EQ(job.config.parallel.workers, 2);
  expect_round_trip(job);
}

TEST(JobFromPlan, GlobalBatchRoundedUpToTheDataWaysWithANote) {
  plan::PlanValues v = tiny_values(4);
  v["training.global_batch"] = {"10", "test"};
  const EmittedJob job = job_from_plan(plan::make_plan(plan::plan_input_from(v)), nullptr);
  ASSERT_EQ(job.config.parallel.workers, 4);
  EXPECT_EQ(job.config.training.batch_size, 3);
  ASSERT_FALSE(job.notes.empty());
  EXPECT_NE(job.notes[0].find("global batch 12"), std::string::npos) << job.notes[0];
}

TEST(JobFromPlan, LargeBatchRuleAndStepsWhenThePlanHasThem) {
  plan::PlanValues v = tiny_values(2);
  v["training.base_lr"] = {"0.001", "test"};
  v["training.reference_batch"] = {"4", "test"};
  v["time.tokens"] = {"256000", "test"};  // 1000 steps of 8 x 32 tokens
  const JobConfig c = job_from_plan(plan::make_plan(plan::plan_input_from(v)), nullptr).config;
  EXPECT_EQ(c.training.steps, 1000);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.001);
  EXPECT_EQ(c.schedule.scale_rule, ScaleRule::Linear);
  EXPECT_EQ(c.schedule.reference_batch, 4);
}

bool has_note(const EmittedJob& job, const std::string& fragment) {
  for (const std::string& n : job.notes)
    if (n.find(fragment) != std::string::npos) return true;
  return false;
}

TEST(JobFromPlan, TrainsInThePlansPrecision) {
  const EmittedJob mixed = job_from_plan(tiny_plan(), nullptr);  // the planner's default: bf16
  ASSERT_EQ(mixed.config.training.precision, Precision::Bf16);
  EXPECT_EQ(parse_job_config(emitted_config_text(mixed, "job.toml"), "emitted").training.precision, Precision::Bf16);
  EXPECT_TRUE(has_note(mixed, "fp32 parameters and gradients"));
  EXPECT_FALSE(has_note(mixed, "trains in fp32"));
  expect_round_trip(mixed);

  plan::PlanValues v = tiny_values();
  v["training.precision"] = {"fp32", "test"};
  const EmittedJob fp32 = job_from_plan(plan::make_plan(plan::plan_input_from(v)), nullptr);
  EXPECT_EQ(fp32.config.training.precision, Precision::Fp32);
  EXPECT_TRUE(fp32.notes.empty());

  v["training.precision"] = {"fp16", "test"};  // the runtime's 16-bit format is bf16
  const EmittedJob fp16 = job_from_plan(plan::make_plan(plan::plan_input_from(v)), nullptr);
  EXPECT_EQ(fp16.config.training.precision, Precision::Bf16);
  EXPECT_TRUE(has_note(fp16, "planned in fp16"));
}

TEST(JobFromPlan, RecomputesWhenThePlanFitsOnlyByRecomputing) {
  plan::Plan p = recommending(tiny_plan(), "dp-ring", {.dp = 2}, 4);
  EXPECT_EQ(job_from_plan(p, nullptr).config.training.recompute, nn::Recompute::None);
  for (plan::StrategyEstimate& e : p.strategies)
    if (e.kind == plan::StrategyKind::DataParallelRing) e.recompute = true;
  const EmittedJob job = job_from_plan(p, nullptr);
  EXPECT_EQ(job.config.training.recompute, nn::Recompute::Full);
  EXPECT_EQ(parse_job_config(emitted_config_text(job, "job.toml"), "emitted").training.recompute,
            nn::Recompute::Full);
  EXPECT_FALSE(has_note(job, "does not run yet"));
  expect_round_trip(job);

  JobConfig base;  // a base job's own setting gives way only to what the plan needs
  base.training.recompute = nn::Recompute::Selective;
  EXPECT_EQ(job_from_plan(p, &base).config.training.recompute, nn::Recompute::Full);
}

TEST(JobFromPlan, RefusesWhatCannotRun) {
  plan::Plan none = tiny_plan();
  none.recommendation.strategy.reset();  // nothing fits
  EXPECT_THROW(job_from_plan(none, nullptr), ConfigError);

  plan::PlanValues v = tiny_values();
  for (const char* key : {"model.layers", "model.hidden", "model.heads", "model.seq_len", "model.vocab"}) v.erase(key);
  v["model.params"] = {"1e6", "test"};
  try {
    job_from_plan(plan::make_plan(plan::plan_input_from(v)), nullptr);
    FAIL() << "a bare parameter count made a job";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bare parameter count"), std::string::npos) << e.what();
  }

  // Three heads do not split over two tensor ways: the validator's message.
  JobConfig base;
  base.model.n_embd = 30;
  base.model.n_head = 3;
  try {
    job_from_plan(recommending(tiny_plan(4), "tp-dp", {.dp = 2, .tp = 2}, 4), &base);
    FAIL() << "an invalid layout was written";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tp-dp, dp2 x tp2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("heads do not split"), std::string::npos) << e.what();
  }
}

TEST(AddJobToPlan, TheJobGivesModelBatchAndOptimizer) {
  JobConfig job;
  job.model.n_layer = 3;
  job.model.n_embd = 48;
  job.model.n_head = 4;
  job.model.block_size = 16;
  job.parallel.data = DataParallelism::AllReduce;
  job.parallel.workers = 4;
  job.parallel.tensor = 2;
  job.training.batch_size = 4;
  plan::PlanValues values = tiny_values();
  values["model.params"] = {"1e9", "plan.toml"};
  add_job_to_plan(job, "job.toml", values);
  EXPECT_EQ(values.count("model.params"), 0u);
  EXPECT_EQ(values.at("model.layers").text, "3");
  EXPECT_EQ(values.at("model.hidden").text, "48");
  EXPECT_EQ(values.at("model.seq_len").text, "16");
  EXPECT_EQ(values.at("training.global_batch").text, "8");  // 4 per worker x 2 data ways
  EXPECT_EQ(values.at("training.optimizer").text, "adamw");
  EXPECT_EQ(values.at("training.precision").text, "fp32");
  EXPECT_EQ(values.at("hardware.devices_per_node").text, "2");  // the hardware stays
  const plan::PlanInput in = plan::plan_input_from(values);
  EXPECT_EQ(in.model.layers, 3);
  EXPECT_EQ(in.global_batch, 8);
}

TEST(AddJobToPlan, ABf16JobIsPlannedInMixedPrecision) {
  JobConfig job;
  job.training.precision = Precision::Bf16;
  plan::PlanValues values = tiny_values();
  add_job_to_plan(job, "job.toml", values);
  EXPECT_EQ(values.at("training.precision").text, "bf16");
  EXPECT_EQ(plan::plan_input_from(values).precision, plan::PlanPrecision::Bf16);
}

TEST(EmittedFile, WrittenAtomicallyAndNeverOverwrittenWithoutForce) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("meshtrain-emit-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "job.toml").string();
  check_may_write(path, false);
  write_file_atomically(path, "one\n");
  EXPECT_THROW(check_may_write(path, false), ConfigError);
  check_may_write(path, true);
  write_file_atomically(path, "two\n");
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(text.str(), "two\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);  // no temporary left
  EXPECT_THROW(check_may_write(dir.string(), true), ConfigError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace meshtrain::cli
