// A worker's heartbeat: a no-op without MESHTRAIN_HEARTBEAT_FILE; otherwise
// the file is created by the first beat and touched at most once a second.
#include "meshtrain/train/loop/heartbeat.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

namespace meshtrain {
namespace {

class HeartbeatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "heartbeat-test.XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    file_ = dir_ + "/worker-0.hb";
  }
  void TearDown() override {
    unsetenv("MESHTRAIN_HEARTBEAT_FILE");
    std::filesystem::remove_all(dir_);
  }
  time_t mtime() const {
    struct stat st {};
    return stat(file_.c_str(), &st) == 0 ? st.st_mtim.tv_sec : -1;
  }
  // Sets the file's mtime far into the past, as if the last beat were old.
  void age() const {
    const timespec old[2] = {{1000, 0}, {1000, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, file_.c_str(), old, 0), 0);
  }

  std::string dir_, file_;
};

TEST_F(HeartbeatTest, WithoutTheVariableItDoesNothing) {
  unsetenv("MESHTRAIN_HEARTBEAT_FILE");
  Heartbeat h;
  EXPECT_FALSE(h.enabled());
  h.beat();
  EXPECT_FALSE(std::filesystem::exists(file_));
}

TEST_F(HeartbeatTest, TheFirstBeatCreatesTheFileAndLaterOnesAreThrottled) {
  setenv("MESHTRAIN_HEARTBEAT_FILE", file_.c_str(), 1);
  Heartbeat h;
  EXPECT_TRUE(h.enabled());
  EXPECT_FALSE(std::filesystem::exists(file_));  // constructing it is no sign of life
  h.beat();
  EXPECT_GT(mtime(), 1000);
  age();
  h.beat();  // within a second of the last: nothing
  EXPECT_EQ(mtime(), 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  h.beat();
  EXPECT_GT(mtime(), 1000);
}

TEST_F(HeartbeatTest, AFileItCannotWriteTurnsItOff) {
  Heartbeat h(dir_ + "/missing/worker-0.hb");
  h.beat();  // reports once on stderr, then stays quiet
  EXPECT_FALSE(h.enabled());
  h.beat();
}

}  // namespace
}  // namespace meshtrain
