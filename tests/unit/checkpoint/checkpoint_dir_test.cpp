// Checkpoint directories: atomic commit, listing, verification, retention.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/checkpoint_dir.hpp"
#include "meshtrain/checkpoint/crc32.hpp"
#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/error.hpp"
#include "temp_dir.hpp"

namespace meshtrain::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Commits a checkpoint whose model.safetensors holds one tensor of `value`s.
CheckpointInfo save_step(const fs::path& dir, int64_t step, float value = 1.0f) {
  CheckpointWriter writer = CheckpointWriter::begin(dir, step);
  const std::vector<float> w(64, value);
  std::vector<TensorEntry> entries = {tensor_entry<float>("w", {8, 8}, w)};
  write_safetensors(writer.file("model.safetensors"), entries, {{"step", std::to_string(step)}});
  testing::write_bytes(writer.file("notes.txt"), "step " + std::to_string(step));
  return writer.commit();
}

std::vector<int64_t> steps(const std::vector<CheckpointInfo>& infos) {
  std::vector<int64_t> s;
  for (const auto& i : infos) s.push_back(i.step);
  return s;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A pid that surely belongs to no process: a child that has exited and been reaped.
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

float first_value(const fs::path& step_dir) {
  SafetensorsReader reader(step_dir / "model.safetensors");
  std::vector<float> w(64);
  reader.read<float>("w", {8, 8}, std::span<float>(w));
  return w[0];
}

TEST(CheckpointDir, StepNames) {
  EXPECT_EQ(step_dir_name(0), "step_00000000");
  EXPECT_EQ(step_dir_name(100), "step_00000100");
  EXPECT_EQ(step_dir_name(123456789), "step_123456789");
}

TEST(CheckpointDir, CommitListAndLatest) {
  TempDir tmp;
  const fs::path dir = tmp / "ckpt";  // created by begin()
  EXPECT_TRUE(list_complete(dir).empty());
  EXPECT_FALSE(latest_complete(dir).has_value());
  CheckpointInfo info = save_step(dir, 20);
  EXPECT_EQ(info.path, dir / "step_00000020");
  save_step(dir, 5);
  save_step(dir, 100000000);
  EXPECT_EQ(steps(list_complete(dir)), (std::vector<int64_t>{5, 20, 100000000}));
  EXPECT_EQ(latest_complete(dir)->step, 100000000);
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"step_00000005", "step_00000020", "step_100000000"}));
  EXPECT_EQ(entries(info.path), (std::vector<std::string>{"MANIFEST.json", "model.safetensors", "notes.txt"}));
  EXPECT_NO_THROW(verify_checkpoint(info.path));
}

TEST(CheckpointDir, ManifestRecordsSizesAndCrc32) {
  TempDir tmp;
  CheckpointInfo info = save_step(tmp.path(), 3);
  auto doc = nlohmann::json::parse(testing::read_bytes(info.path / "MANIFEST.json"));
  EXPECT_EQ(doc["format"], "meshtrain-checkpoint");
  EXPECT_EQ(doc["step"], 3);
  ASSERT_EQ(doc["files"].size(), 2u);
  const auto& model = doc["files"][0];
  EXPECT_EQ(model["name"], "model.safetensors");
  const std::string bytes = testing::read_bytes(info.path / "model.safetensors");
  EXPECT_EQ(model["bytes"], bytes.size());
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", crc32_update(0, bytes.data(), bytes.size()));
  EXPECT_EQ(model["crc32"], hex);
}

TEST(CheckpointDir, AbandonedWriterLeavesNothing) {
  TempDir tmp;
  {
    CheckpointWriter writer = CheckpointWriter::begin(tmp.path(), 7);
    testing::write_bytes(writer.file("model.safetensors"), "partial");
    EXPECT_TRUE(fs::exists(writer.tmp_path()));
    EXPECT_FALSE(list_complete(tmp.path()).size());  // in progress: not complete
  }
  EXPECT_TRUE(entries(tmp.path()).empty());
}

TEST(CheckpointDir, OneWriterPerStepPerProcess) {
  TempDir tmp;
  CheckpointWriter first = CheckpointWriter::begin(tmp.path(), 7);
  EXPECT_THROW(CheckpointWriter::begin(tmp.path(), 7), CheckpointError);
  EXPECT_THROW(CheckpointWriter::begin(tmp.path(), -1), CheckpointError);
}

TEST(CheckpointDir, LeftoverTmpDirsAreIgnoredThenPruned) {
  TempDir tmp;
  CheckpointInfo good = save_step(tmp.path(), 10);
  // A crashed writer's tmp dir, even one holding a valid manifest, is not complete.
  const fs::path dead = tmp / (".step_00000020.tmp-" + std::to_string(dead_pid()));
  fs::copy(good.path, dead);
  // A leftover from an earlier process that had our pid.
  const fs::path reused = tmp / (".step_00000030.tmp-" + std::to_string(getpid()));
  fs::create_directory(reused);
  // A live writer in another process (our parent stands in for it).
  const fs::path live = tmp / (".step_00000040.tmp-" + std::to_string(getppid()));
  fs::create_directory(live);
  // Final name without a manifest: not ours to judge, never listed, never deleted.
  fs::create_directory(tmp / "step_00000050");
  testing::write_bytes(tmp / "step_00000050" / "model.safetensors", "x");

  std::vector<std::string> skipped;
  EXPECT_EQ(steps(list_complete(tmp.path(), &skipped)), (std::vector<int64_t>{10}));
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("step_00000050"), std::string::npos) << skipped[0];
  EXPECT_EQ(latest_complete(tmp.path())->step, 10);

  auto removed = prune(tmp.path(), 3);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<fs::path>{dead, reused}));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(tmp / "step_00000050"));
  EXPECT_TRUE(fs::exists(good.path));
}

TEST(CheckpointDir, OnlyOurNamesAreListedOrPruned) {
  TempDir tmp;
  CheckpointInfo good = save_step(tmp.path(), 10);
  // A dead writer's leftovers of every transient kind go; names that only
  // look like ours stay, whatever they hold.
  const std::string dead = std::to_string(dead_pid());
  std::vector<fs::path> leftovers, foreign;
  for (const char* kind : {".tmp-", ".old-", ".del-"})
    leftovers.push_back(tmp / (".step_00000020" + std::string(kind) + dead));
  const std::vector<std::string> transient_lookalikes = {
      ".step_00000020.bak-" + dead, ".step_0000020.tmp-" + dead, ".step_00000020.tmp-",
      ".step_00000020.tmp-" + dead + "x", "step_00000020.tmp-" + dead, ".step_00000020.tmp-1234567890"};
  for (const std::string& name : transient_lookalikes) foreign.push_back(tmp / name);
  const std::vector<std::string> step_lookalikes = {"step_0000030", "step_00000030x", "step_000000030",
                                                    "step_1000000000000000000", "Step_00000030"};
  for (const std::string& name : step_lookalikes) {
    fs::copy(good.path, tmp / name);  // a valid manifest, under a name that is not a step's
    foreign.push_back(tmp / name);
  }
  for (const fs::path& p : leftovers) fs::create_directory(p);
  for (const fs::path& p : foreign) fs::create_directories(p);

  std::vector<std::string> skipped;  // final names judged incomplete: none of these is one
  EXPECT_EQ(steps(list_complete(tmp.path(), &skipped)), (std::vector<int64_t>{10}));
  EXPECT_TRUE(skipped.empty()) << skipped[0];
  auto removed = prune(tmp.path(), 3);
  std::sort(removed.begin(), removed.end());
  std::sort(leftovers.begin(), leftovers.end());
  EXPECT_EQ(removed, leftovers);
  for (const fs::path& p : foreign) EXPECT_TRUE(fs::exists(p)) << p;
}

TEST(CheckpointDir, PruneKeepsTheNewestK) {
  TempDir tmp;
  for (int64_t s : {1, 2, 3, 4, 5}) save_step(tmp.path(), s * 100);
  CheckpointWriter in_progress = CheckpointWriter::begin(tmp.path(), 600);
  auto removed = prune(tmp.path(), 3);
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_EQ(steps(list_complete(tmp.path())), (std::vector<int64_t>{300, 400, 500}));
  EXPECT_TRUE(fs::exists(in_progress.tmp_path())) << "a live writer's tmp dir is kept";
  prune(tmp.path(), 0);  // 0 still keeps one
  EXPECT_EQ(steps(list_complete(tmp.path())), (std::vector<int64_t>{500}));
  prune(tmp.path(), 1);
  EXPECT_EQ(steps(list_complete(tmp.path())), (std::vector<int64_t>{500}));
  in_progress.commit();
  prune(tmp.path(), 1);
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"step_00000600"}));
}

TEST(CheckpointDir, PruneNeverDeletesTheOnlyCompleteCheckpoint) {
  TempDir tmp;
  save_step(tmp.path(), 1);
  // Newer but broken: truncated file, so not complete and not counted.
  CheckpointInfo broken = save_step(tmp.path(), 2);
  fs::resize_file(broken.path / "model.safetensors", 10);
  prune(tmp.path(), 1);
  EXPECT_EQ(steps(list_complete(tmp.path())), (std::vector<int64_t>{1}));
  EXPECT_TRUE(fs::exists(broken.path));
  EXPECT_TRUE(prune(tmp / "missing", 1).empty());
}

TEST(CheckpointDir, TruncatedFileMakesACheckpointIncomplete) {
  TempDir tmp;
  save_step(tmp.path(), 1);
  CheckpointInfo second = save_step(tmp.path(), 2);
  fs::resize_file(second.path / "notes.txt", 2);
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_complete(tmp.path())->step, 1);
  list_complete(tmp.path(), &skipped);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("notes.txt has 2 bytes"), std::string::npos) << skipped[0];
}

TEST(CheckpointDir, CorruptedByteIsCaughtByTheChecksum) {
  TempDir tmp;
  save_step(tmp.path(), 1, 1.0f);
  CheckpointInfo second = save_step(tmp.path(), 2, 2.0f);
  // Flip one bit of tensor data: the safetensors structure stays valid and
  // the size is unchanged, so only the checksum can tell.
  const fs::path model = second.path / "model.safetensors";
  std::string bytes = testing::read_bytes(model);
  bytes[bytes.size() - 3] ^= 0x10;
  testing::write_bytes(model, bytes);
  EXPECT_NO_THROW(SafetensorsReader{model});
  EXPECT_EQ(latest_complete(tmp.path())->step, 2);  // sizes still match
  try {
    verify_checkpoint(second.path);
    FAIL() << "corruption not detected";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.safetensors is corrupt"), std::string::npos) << msg;
  }
  std::vector<std::string> skipped;
  auto verified = latest_verified(tmp.path(), &skipped);
  ASSERT_TRUE(verified.has_value());
  EXPECT_EQ(verified->step, 1);
  EXPECT_EQ(first_value(verified->path), 1.0f);
  ASSERT_EQ(skipped.size(), 1u);
}

TEST(CheckpointDir, RewritingAStepKeepsTheOldOneUntilTheNewOneIsComplete) {
  TempDir tmp;
  CheckpointInfo old = save_step(tmp.path(), 10, 1.0f);
  {
    // Abandoned rewrite: the old checkpoint is untouched.
    CheckpointWriter writer = CheckpointWriter::begin(tmp.path(), 10);
    testing::write_bytes(writer.file("model.safetensors"), "half");
  }
  EXPECT_EQ(first_value(old.path), 1.0f);
  CheckpointWriter writer = CheckpointWriter::begin(tmp.path(), 10);
  const std::vector<float> w(64, 2.0f);
  std::vector<TensorEntry> e = {tensor_entry<float>("w", {8, 8}, w)};
  write_safetensors(writer.file("model.safetensors"), e);
  EXPECT_EQ(first_value(old.path), 1.0f) << "still the old one before commit";
  writer.commit();
  EXPECT_EQ(first_value(old.path), 2.0f);
  EXPECT_NO_THROW(verify_checkpoint(old.path));
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"step_00000010"}));
  EXPECT_EQ(entries(old.path), (std::vector<std::string>{"MANIFEST.json", "model.safetensors"}));
}

TEST(CheckpointDir, UnusableDirectoryIsAnIoErrorAndTouchesNothing) {
  TempDir tmp;
  testing::write_bytes(tmp / "file", "keep me");
  EXPECT_THROW(CheckpointWriter::begin(tmp / "file", 1), IoError);
  EXPECT_THROW(CheckpointWriter::begin(tmp / "file" / "sub", 1), IoError);
  EXPECT_THROW(list_complete(tmp / "file"), IoError);
  EXPECT_EQ(testing::read_bytes(tmp / "file"), "keep me");
  if (geteuid() != 0) {  // root ignores permission bits
    fs::create_directory(tmp / "ro");
    fs::permissions(tmp / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(CheckpointWriter::begin(tmp / "ro", 1), IoError);
    fs::permissions(tmp / "ro", fs::perms::owner_all);
  }
}

TEST(CheckpointDir, SubdirectoriesAreRefusedAtCommit) {
  TempDir tmp;
  CheckpointWriter writer = CheckpointWriter::begin(tmp.path(), 1);
  fs::create_directory(writer.file("shards"));
  EXPECT_THROW(writer.commit(), CheckpointError);
  EXPECT_TRUE(list_complete(tmp.path()).empty());
}

TEST(CheckpointDir, VerifyRefusesNonFinalNamesAndBadManifests) {
  TempDir tmp;
  CheckpointInfo info = save_step(tmp.path(), 4);
  fs::copy(info.path, tmp / "copy", fs::copy_options::recursive);
  EXPECT_THROW(verify_checkpoint(tmp / "copy"), CheckpointError);
  testing::write_bytes(info.path / "MANIFEST.json", "{not json");
  EXPECT_THROW(verify_checkpoint(info.path), CheckpointError);
  EXPECT_TRUE(list_complete(tmp.path()).empty());
  // A manifest that claims another step is refused too.
  CheckpointInfo other = save_step(tmp.path(), 5);
  fs::copy_file(other.path / "MANIFEST.json", info.path / "MANIFEST.json", fs::copy_options::overwrite_existing);
  EXPECT_THROW(verify_checkpoint(info.path), CheckpointError);
}

}  // namespace
}  // namespace meshtrain::checkpoint
