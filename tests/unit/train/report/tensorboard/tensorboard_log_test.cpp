// Metrics records as TensorBoard files: which tags a record becomes, the
// file a log writes, and what resuming leaves of older files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "meshtrain/train/report/metrics_log.hpp"
#include "meshtrain/train/report/tensorboard/event_proto.hpp"
#include "meshtrain/train/report/tensorboard/event_trim.hpp"
#include "meshtrain/train/report/tensorboard/scalar_tags.hpp"
#include "meshtrain/train/report/tensorboard/tensorboard_log.hpp"
#include "meshtrain/train/report/tensorboard/tfrecord.hpp"

namespace meshtrain::tensorboard {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("meshtrain_tb_test_" + std::to_string(::getpid()) + "_" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find("tfevents") != std::string::npos) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Steps of a file's events, 0 for the file-version event.
std::vector<int64_t> steps_in(const fs::path& file) {
  const std::string bytes = read_all(file);
  std::vector<int64_t> steps;
  for (std::string_view r : scan_records(bytes).records) steps.push_back(decode_event_head(r)->step);
  return steps;
}

std::map<std::string, float> tags_of(const nlohmann::json& record, ScalarSource source) {
  std::map<std::string, float> out;
  const auto r = scalars_of_record(record, source);
  for (const Scalar& s : r->scalars) out[s.tag] = s.value;
  return out;
}

TEST(ScalarTags, TrainerRecords) {
  const nlohmann::json step = {{"step", 5},         {"loss", 2.5},          {"lr", 1e-3},
                               {"grad_norm", 0.75}, {"tokens_per_s", 1e4},  {"comm_hidden_share", 0.5},
                               {"comm_ms", 3.0},    {"peak_total_mb", 12.0}, {"batch_size", 4},
                               {"aux_loss", 0.01},  {"rank", 0},            {"time", 1700000000.5},
                               {"moe", {{{"layer", 1}, {"load", {1, 2}}}}}, {"flag", true}};
  const auto r = scalars_of_record(step, ScalarSource::Trainer);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->step, 5);
  EXPECT_EQ(r->wall_time, 1700000000.5);
  const std::map<std::string, float> want = {
      {"train/loss", 2.5f},       {"train/lr", 1e-3f},          {"train/grad_norm", 0.75f},
      {"train/tokens_per_s", 1e4f}, {"comm/hidden_share", 0.5f}, {"comm/ms", 3.0f},
      {"memory/peak_total_mb", 12.0f}, {"job/batch_size", 4.0f}, {"moe/aux_loss", 0.01f}};
  EXPECT_EQ(tags_of(step, ScalarSource::Trainer), want);

  EXPECT_EQ(tags_of({{"step", 10}, {"val_loss", 2.0}, {"val_accuracy", 0.25}, {"val_batches", 2}},
                    ScalarSource::Trainer),
            (std::map<std::string, float>{{"val/loss", 2.0f}, {"val/accuracy", 0.25f}, {"val/batches", 2.0f}}));
  EXPECT_EQ(tags_of({{"step", 20}, {"memory", "peak"}, {"peak_total_mb", 13.0}}, ScalarSource::Trainer),
            (std::map<std::string, float>{{"run/peak_total_mb", 13.0f}}));
  EXPECT_FALSE(scalars_of_record({{"step", 20}, {"pipeline_stages", nlohmann::json::array()}}, ScalarSource::Trainer));
  EXPECT_FALSE(scalars_of_record({{"loss", 1.0}}, ScalarSource::Trainer));  // no step
}

TEST(ScalarTags, PerRankRecords) {
  const nlohmann::json rec = {{"step", 30},
                              {"ranks", {{{"worker", 0}, {"busy_ms", 4.0}}, {{"worker", 1}, {"busy_ms", 9.0}}}},
                              {"stragglers", {1}}};
  EXPECT_EQ(tags_of(rec, ScalarSource::Trainer),
            (std::map<std::string, float>{{"ranks/worker_0/busy_ms", 4.0f}, {"ranks/worker_1/busy_ms", 9.0f}}));
}

TEST(ScalarTags, EvaluatorRecords) {
  const nlohmann::json rec = {{"step", 10},       {"val_loss", 2.0}, {"val_accuracy", 0.5},
                              {"predictions", 64}, {"batches", 2},   {"checkpoint", "/x/step_00000010"}};
  EXPECT_EQ(tags_of(rec, ScalarSource::Evaluator),
            (std::map<std::string, float>{
                {"eval/loss", 2.0f}, {"eval/accuracy", 0.5f}, {"eval/predictions", 64.0f}, {"eval/batches", 2.0f}}));
  EXPECT_FALSE(scalars_of_record(rec, ScalarSource::Evaluator)->wall_time);
}

TEST(TensorBoardLog, WritesTheFileVersionThenOneEventPerRecord) {
  TempDir tmp;
  fs::path path;
  {
    TensorBoardLog log(tmp.path / "tb", ScalarSource::Trainer);
    path = log.path();
    log.write({{"step", 1}, {"loss", 3.0}, {"time", 100.0}});
    log.write({{"step", 1}, {"pipeline_stages", nlohmann::json::array()}});  // nothing to show
    log.write({{"step", 2}, {"loss", 2.0}, {"time", 101.0}});
  }
  const std::string name = path.filename().string();
  EXPECT_TRUE(name.starts_with("events.out.tfevents.")) << name;
  EXPECT_TRUE(name.ends_with("." + std::to_string(::getpid()) + ".0")) << name;
  const std::string bytes = read_all(path);
  const RecordScan scan = scan_records(bytes);
  EXPECT_EQ(scan.valid_bytes, bytes.size());
  ASSERT_EQ(scan.records.size(), 3u);
  EXPECT_NE(scan.records[0].find("brain.Event:2"), std::string_view::npos);
  EXPECT_EQ(scan.records[2], encode_scalar_event(101.0, 2, {{"train/loss", 2.0f}}));

  TensorBoardLog evaluator(tmp.path / "tb", ScalarSource::Evaluator);
  EXPECT_TRUE(evaluator.path().filename().string().ends_with(".evaluator"));
  EXPECT_FALSE(is_trainer_event_file(evaluator.path()));
  EXPECT_TRUE(is_trainer_event_file(path));
}

TEST(EventTrim, ResumeKeepsTheStepsUpToTheCheckpointInEveryTrainerFile) {
  TempDir tmp;
  const fs::path dir = tmp.path / "tb";
  fs::path first, second, evaluator;
  {
    TensorBoardLog a(dir, ScalarSource::Trainer);
    for (int s = 1; s <= 8; ++s) a.write({{"step", s}, {"loss", 1.0}});
    first = a.path();
  }
  {
    TensorBoardLog e(dir, ScalarSource::Evaluator);
    e.write({{"step", 8}, {"val_loss", 1.0}});  // an evaluator's: never touched
    evaluator = e.path();
  }
  // A killed writer's partial last record.
  std::ofstream(first, std::ios::app | std::ios::binary) << frame_record(encode_scalar_event(1, 9, {})).substr(0, 7);
  const std::string evaluator_bytes = read_all(evaluator);

  EXPECT_EQ(drop_events_after(dir, 5), 3);  // steps 6, 7, 8
  EXPECT_EQ(steps_in(first), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(read_all(first).size(), scan_records(read_all(first)).valid_bytes);  // the partial record went too
  EXPECT_EQ(read_all(evaluator), evaluator_bytes);
  EXPECT_EQ(drop_events_after(dir, 5), 0);  // again: nothing more

  {  // the resumed run, killed after step 7, then resumed from 3
    TensorBoardLog b(dir, ScalarSource::Trainer);
    for (int s = 6; s <= 7; ++s) b.write({{"step", s}, {"loss", 1.0}});
    second = b.path();
  }
  EXPECT_EQ(drop_events_after(dir, 3), 4);  // 4, 5 of the first file; 6, 7 of the second
  EXPECT_EQ(steps_in(first), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_FALSE(fs::exists(second));  // no summary left
  std::vector<fs::path> left{first, evaluator};
  std::sort(left.begin(), left.end());
  EXPECT_EQ(event_files(dir), left);

  // A run that starts over removes the trainer's files.
  EXPECT_EQ(drop_events_after(dir, 0), 3);
  EXPECT_EQ(event_files(dir), std::vector<fs::path>{evaluator});
  for (const auto& e : fs::directory_iterator(dir))  // no temporary file left behind
    EXPECT_TRUE(e.path() == evaluator) << e.path();
  EXPECT_EQ(drop_events_after(tmp.path / "missing", 3), 0);
}

TEST(EventTrim, OpenForTheTrainerTrimsEvenWhenOff) {
  TempDir tmp;
  const fs::path dir = tmp.path / "tb";
  fs::path old;
  {
    auto log = open_trainer_tensorboard(dir, 0, true);
    ASSERT_TRUE(log);
    for (int s = 1; s <= 4; ++s) log->write({{"step", s}, {"loss", 1.0}});
    old = log->path();
  }
  EXPECT_FALSE(open_trainer_tensorboard(dir, 2, false));
  EXPECT_EQ(steps_in(old), (std::vector<int64_t>{0, 1, 2}));

  // The next file sorts after the older ones, even within the same second
  // or behind a file from a clock that ran ahead.
  const auto again = open_trainer_tensorboard(dir, 2, true);
  EXPECT_GT(again->path().filename().string(), old.filename().string());
  const fs::path ahead = dir / "events.out.tfevents.9999999990.otherhost.1.0";
  fs::copy_file(old, ahead);
  const auto later = open_trainer_tensorboard(dir, 2, true);
  EXPECT_TRUE(later->path().filename().string().starts_with("events.out.tfevents.9999999991.")) << later->path();
  EXPECT_EQ(newest_name_time(dir, is_trainer_event_file), 9999999991);
}

TEST(MetricsLogMirror, PassesEachStampedRecordOn) {
  TempDir tmp;
  fs::path tb_file;
  {
    auto tb = std::make_unique<TensorBoardLog>(tmp.path / "tb", ScalarSource::Trainer);
    tb_file = tb->path();
    MetricsLog log((tmp.path / "metrics.jsonl").string(), 0, 0, std::move(tb));
    log.write({{"step", 1}, {"loss", 2.5}});
  }
  std::ifstream in(tmp.path / "metrics.jsonl");
  std::string line;
  std::getline(in, line);
  const auto rec = nlohmann::json::parse(line);
  const std::string bytes = read_all(tb_file);
  const RecordScan scan = scan_records(bytes);
  ASSERT_EQ(scan.records.size(), 2u);
  // The event carries the line's own time as its wall time.
  EXPECT_EQ(scan.records[1], encode_scalar_event(rec["time"].get<double>(), 1, {{"train/loss", 2.5f}}));
}

}  // namespace
}  // namespace meshtrain::tensorboard
