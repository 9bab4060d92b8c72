#pragma once
// POSIX file primitives that make writes durable and reads bounded.
// Durability on Linux needs three things the standard library cannot say:
// fsync the file, rename it into place, fsync the directory that holds the
// name. Every failure is an IoError naming the path and the errno text.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace meshtrain::checkpoint {

namespace fs = std::filesystem;

// "open /a/b: Permission denied" from the current errno.
std::string errno_text(std::string_view what, const fs::path& path);

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  Fd(int fd, fs::path path) : fd_(fd), path_(std::move(path)) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();

  // Opens read-only; throws IoError.
  static Fd open_read(const fs::path& path);
  int get() const { return fd_; }
  const fs::path& path() const { return path_; }
  uint64_t size() const;
  // Writes all bytes (retrying short writes and EINTR).
  void write_all(const void* data, size_t bytes);
  // Reads exactly `bytes` at `offset`; returns false if the file ends first.
  bool pread_exact(void* out, size_t bytes, uint64_t offset) const;
  void fsync();
  // Closes and reports a close() error (NFS reports write errors there).
  void close();

 private:
  int fd_ = -1;
  fs::path path_;
};

// fsync a directory so that names created, renamed or removed in it survive a crash.
void fsync_dir(const fs::path& dir);
// fsync an existing file by path.
void fsync_file(const fs::path& path);

// A file written under a temporary name in its target's directory and
// renamed over the target by commit(), so a reader sees the old file or the
// new one, never half of one. Destroyed without commit(), it removes the
// temporary file and leaves the target untouched.
class AtomicFile {
 public:
  explicit AtomicFile(fs::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes) { fd_.write_all(data, bytes); }
  // fsync, close, rename over the target, fsync the directory.
  void commit();

 private:
  fs::path target_;
  fs::path tmp_;
  Fd fd_;
  bool committed_ = false;
};

}  // namespace meshtrain::checkpoint
