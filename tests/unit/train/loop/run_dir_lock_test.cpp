// One job per run directory: the lock a job's lead takes on
// <training.out_dir>/.meshtrain.lock. A second holder fails naming the first,
// the lock dies with its holder (and with exec), and deleting the file is a
// takeover.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <thread>

#include "meshtrain/train/loop/run_dir_lock.hpp"

namespace meshtrain {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed after it.
class RunDirLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("meshtrain-run-dir-lock-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(root_);
    dir_ = (root_ / "run").string();
  }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
    fs::remove_all(root_);
  }

  // Forks a child that takes the lock, reports it on a pipe and, with
  // `then_exec`, execs `sleep` (which must not inherit the lock), else waits
  // to be killed. Returns once the child holds the lock.
  void start_holder(bool then_exec = false) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      ::close(fds[0]);
      char status = 'x';
      try {
        RunDirLock lock(dir_);
        status = 'y';
        if (::write(fds[1], &status, 1) != 1) ::_exit(2);
        if (then_exec) {
          ::execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
          ::_exit(3);
        }
        for (;;) ::pause();
      } catch (...) {
        if (::write(fds[1], &status, 1) != 1) ::_exit(2);
        ::_exit(1);
      }
    }
    ::close(fds[1]);
    char status = 0;
    ASSERT_EQ(::read(fds[0], &status, 1), 1);
    ::close(fds[0]);
    ASSERT_EQ(status, 'y') << "the child could not take the lock";
  }

  std::string lock_path() const { return dir_ + "/" + RunDirLock::kFileName; }

  fs::path root_;
  std::string dir_;
  pid_t child_ = -1;
};

TEST_F(RunDirLockTest, CreatesTheDirectoryAndRecordsTheHolder) {
  RunDirLock lock(dir_);
  EXPECT_TRUE(lock.held());
  EXPECT_EQ(lock.path(), lock_path());
  ASSERT_TRUE(fs::is_regular_file(lock_path()));
  const auto holder = read_run_dir_holder(lock_path());
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, ::getpid());
  EXPECT_EQ(holder->parent_pid, ::getppid());
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(holder->host, host);
  EXPECT_EQ(holder->since.size(), 20u) << holder->since;  // 2024-01-02T03:04:05Z
  EXPECT_NE(holder->command.find("unit_train"), std::string::npos) << holder->command;
}

TEST_F(RunDirLockTest, SecondLockInAnotherProcessFailsNamingTheHolder) {
  start_holder();
  try {
    RunDirLock second(dir_);
    FAIL() << "a second lock was taken while the first holder lives";
  } catch (const RunDirBusyError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pid " + std::to_string(child_) + " on host "), std::string::npos) << what;
    EXPECT_NE(what.find("is in use by another job"), std::string::npos) << what;
    EXPECT_NE(what.find(dir_), std::string::npos) << what;
    EXPECT_NE(what.find(" since 20"), std::string::npos) << what;
    EXPECT_NE(what.find("delete " + lock_path()), std::string::npos) << what;  // how to take it over
  }
  // A RunDirBusyError is a ConfigError: exit status 3, not restarted.
  EXPECT_THROW(RunDirLock{dir_}, ConfigError);
}

TEST_F(RunDirLockTest, FreedWhenTheHolderDies) {
  start_holder();
  EXPECT_THROW(RunDirLock{dir_}, RunDirBusyError);
  ASSERT_EQ(::kill(child_, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child_, nullptr, 0), child_);
  child_ = -1;
  RunDirLock lock(dir_);  // a restarted job takes it again
  EXPECT_TRUE(lock.held());
  EXPECT_EQ(read_run_dir_holder(lock_path())->pid, ::getpid());
}

TEST_F(RunDirLockTest, NotInheritedByAProgramTheHolderExecs) {
  start_holder(/*then_exec=*/true);
  // The child's lock is gone once it became `sleep`, although it lives on.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    try {
      RunDirLock lock(dir_);
      break;
    } catch (const RunDirBusyError&) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the exec'd program kept the lock";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(::kill(child_, 0), 0) << "sleep ended early: the test proved nothing";
}

TEST_F(RunDirLockTest, ReleasedOnDestructionAndMovable) {
  {
    RunDirLock first(dir_);
    EXPECT_THROW(RunDirLock{dir_}, RunDirBusyError);  // another open file of the same process too
    RunDirLock moved(std::move(first));
    EXPECT_TRUE(moved.held());
    EXPECT_FALSE(first.held());  // NOLINT(bugprone-use-after-move): the moved-from holds nothing
    EXPECT_THROW(RunDirLock{dir_}, RunDirBusyError);
  }
  RunDirLock again(dir_);
  EXPECT_TRUE(again.held());
  EXPECT_TRUE(fs::is_regular_file(lock_path()));  // the file stays, naming the last holder
}

TEST_F(RunDirLockTest, DeletingTheFileIsATakeover) {
  start_holder();  // alive but, say, hung
  ASSERT_TRUE(fs::remove(lock_path()));
  RunDirLock taken(dir_);  // a fresh file, locked
  EXPECT_TRUE(taken.held());
  EXPECT_EQ(read_run_dir_holder(lock_path())->pid, ::getpid());
  // The next job is refused naming the new holder, not the old one.
  try {
    RunDirLock third(dir_);
    FAIL() << "a third lock was taken";
  } catch (const RunDirBusyError& e) {
    EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(::getpid()) + " "), std::string::npos) << e.what();
  }
}

TEST_F(RunDirLockTest, AHolderThatRecordsNothingIsStillRefused) {
  fs::create_directories(dir_);
  const int fd = ::open(lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  try {
    RunDirLock second(dir_);
    FAIL() << "a second lock was taken";
  } catch (const RunDirBusyError& e) {
    EXPECT_NE(std::string(e.what()).find("records no holder"), std::string::npos) << e.what();
  }
  ::close(fd);
  EXPECT_FALSE(read_run_dir_holder(lock_path()).has_value());
  RunDirLock now(dir_);
  EXPECT_TRUE(read_run_dir_holder(lock_path()).has_value());
}

TEST_F(RunDirLockTest, ADirectoryThatCannotBeCreatedIsAnIoError) {
  fs::create_directories(root_);
  std::ofstream(root_ / "file") << "x";
  EXPECT_THROW(RunDirLock{(root_ / "file" / "run").string()}, IoError);
}

}  // namespace
}  // namespace meshtrain
