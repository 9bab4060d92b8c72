#include "meshtrain/checkpoint/durable_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "meshtrain/core/error.hpp"

namespace meshtrain::checkpoint {

std::string errno_text(std::string_view what, const fs::path& path) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(errno);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd Fd::open_read(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(errno_text("open", path));
  return Fd(fd, path);
}

uint64_t Fd::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw IoError(errno_text("fstat", path_));
  return static_cast<uint64_t>(st.st_size);
}

void Fd::write_all(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    // Linux moves at most ~2 GiB per call; ask for 1 GiB at a time.
    ssize_t n = ::write(fd_, p, bytes < (1u << 30) ? bytes : (1u << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_text("write", path_));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

bool Fd::pread_exact(void* out, size_t bytes, uint64_t offset) const {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, p, bytes < (1u << 30) ? bytes : (1u << 30), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_text("read", path_));
    }
    if (n == 0) return false;  // the file is shorter than promised
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

void Fd::fsync() {
  if (::fsync(fd_) != 0) throw IoError(errno_text("fsync", path_));
}

void Fd::close() {
  int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0) throw IoError(errno_text("close", path_));
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw IoError(errno_text("open directory", dir));
  Fd owned(fd, dir);
  owned.fsync();
}

void fsync_file(const fs::path& path) {
  Fd fd = Fd::open_read(path);
  fd.fsync();
}

namespace {
// Temporary names must not collide between threads of one process either.
std::atomic<uint64_t> tmp_counter{0};
}  // namespace

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  const fs::path dir = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  // Built with += : GCC 12 warns falsely (-Wrestrict) on "." + std::string.
  std::string name = ".";
  name += target_.filename().string();
  name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(tmp_counter.fetch_add(1));
  tmp_ = dir / name;
  int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(errno_text("create", tmp_));
  fd_ = Fd(fd, tmp_);
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  fd_ = Fd();  // closes
  ::unlink(tmp_.c_str());
}

void AtomicFile::commit() {
  fd_.fsync();
  fd_.close();
  if (::rename(tmp_.c_str(), target_.c_str()) != 0)
    throw IoError(errno_text("rename " + tmp_.string() + " over", target_));
  committed_ = true;
  fsync_dir(target_.has_parent_path() ? target_.parent_path() : fs::path("."));
}

}  // namespace meshtrain::checkpoint
