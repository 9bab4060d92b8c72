#include "meshtrain/data/tokens/token_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

// Both formats are little-endian and read in place.
static_assert(std::endian::native == std::endian::little, "token files are read in place: little-endian hosts only");

namespace {

int32_t header_int(std::span<const std::byte> head, size_t i) {
  int32_t v;
  std::memcpy(&v, head.data() + i * sizeof v, sizeof v);
  return v;
}

[[noreturn]] void bad(const std::string& name, const std::string& what) {
  throw DataError("token file " + name + ": " + what);
}

}  // namespace

TokenFileLayout parse_token_file_layout(std::span<const std::byte> head, uint64_t file_size, const std::string& name) {
  const uint64_t n = file_size;
  const int32_t first = head.size() >= 4 ? header_int(head, 0) : 0;
  if (first == kLlmcMagic) {
    if (n < kLlmcHeaderBytes)
      bad(name, "llm.c header is truncated: the file has " + std::to_string(n) + " bytes, the header alone " +
                    std::to_string(kLlmcHeaderBytes));
    const int32_t version = header_int(head, 1), count = header_int(head, 2);
    if (version != kLlmcVersion)
      bad(name, "llm.c version " + std::to_string(version) + " is not supported (meshtrain reads version " +
                    std::to_string(kLlmcVersion) + ": uint16 tokens)");
    if (count < 0) bad(name, "llm.c header gives a negative token count " + std::to_string(count));
    const uint64_t expected = kLlmcHeaderBytes + 2 * static_cast<uint64_t>(count);
    if (n != expected)
      bad(name, "llm.c header says " + std::to_string(count) + " tokens (" + std::to_string(expected) +
                    " bytes with the header), but the file has " + std::to_string(n) + " bytes" +
                    (n < expected ? " (truncated?)" : ""));
    return {TokenFileFormat::Llmc, kLlmcHeaderBytes, count};
  }
  if (first == kLlmcLlama3Magic)
    bad(name, "llm.c's Llama 3 format (magic " + std::to_string(kLlmcLlama3Magic) +
                  ", uint32 tokens) is not supported; meshtrain reads uint16 tokens (magic " +
                  std::to_string(kLlmcMagic) + ", or raw)");
  // A header in llm.c's shape (small version, a count that matches the
  // size) under another magic is a damaged llm.c file, not raw tokens.
  if (n >= kLlmcHeaderBytes && head.size() >= 12) {
    const int32_t version = header_int(head, 1), count = header_int(head, 2);
    if (version >= 1 && version <= 16 && count >= 0 && kLlmcHeaderBytes + 2 * static_cast<uint64_t>(count) == n)
      bad(name, "wrong magic " + std::to_string(first) + ": the file has llm.c's header shape (version " +
                    std::to_string(version) + ", " + std::to_string(count) +
                    " tokens, matching its size), but llm.c's magic is " + std::to_string(kLlmcMagic));
  }
  if (n % 2 != 0)
    bad(name, "has an odd number of bytes (" + std::to_string(n) +
                  "); raw nanoGPT tokens are 2 bytes each (truncated?), and there is no llm.c magic " +
                  std::to_string(kLlmcMagic));
  return {TokenFileFormat::NanoGpt, 0, static_cast<int64_t>(n / 2)};
}

MappedTokenFile::MappedTokenFile(const std::filesystem::path& path) : path_(path) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) bad(name, "does not exist");
  if (std::filesystem::is_directory(status)) bad(name, "is a directory, not a file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) bad(name, std::string("cannot be opened: ") + std::strerror(errno));
  std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  struct stat st {};
  if (::fstat(fd, &st) != 0) bad(name, std::string("cannot be inspected: ") + std::strerror(errno));
  const auto size = static_cast<uint64_t>(st.st_size);
  std::byte head[kLlmcHeaderBytes];
  const size_t want = static_cast<size_t>(std::min<uint64_t>(size, sizeof head));
  size_t got = 0;
  while (got < want) {
    const ssize_t r = ::pread(fd, head + got, want - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) bad(name, std::string("cannot be read: ") + (r < 0 ? std::strerror(errno) : "unexpected end"));
    got += static_cast<size_t>(r);
  }
  layout_ = parse_token_file_layout({head, got}, size, name);
  if (size == 0) return;
  map_ = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    bad(name, std::string("cannot be mapped into memory: ") + std::strerror(errno));
  }
  map_bytes_ = size;
  tokens_ = {reinterpret_cast<const uint16_t*>(static_cast<const std::byte*>(map_) + layout_.header_bytes),
             static_cast<size_t>(layout_.tokens)};
}

MappedTokenFile::~MappedTokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

void check_token_ids(std::span<const uint16_t> tokens, int64_t vocab_size, const std::string& name) {
  if (vocab_size <= 0 || vocab_size >= kTokenFileIdLimit) return;
  // The maximum first (a loop the compiler vectorizes), the position only on failure.
  uint16_t max = 0;
  for (const uint16_t t : tokens) max = std::max(max, t);
  if (max < vocab_size) return;
  const auto it = std::find_if(tokens.begin(), tokens.end(), [&](uint16_t t) { return t >= vocab_size; });
  bad(name, "token " + std::to_string(*it) + " at position " + std::to_string(it - tokens.begin()) +
                " is not below model.vocab_size = " + std::to_string(vocab_size) +
                " (the largest id in the file is " + std::to_string(max) + ")");
}

void write_token_file(const std::filesystem::path& path, std::span<const int32_t> tokens, TokenFileFormat format) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= kTokenFileIdLimit)
      throw DataError("token file " + path.string() + ": token " + std::to_string(tokens[i]) + " at position " +
                      std::to_string(i) + " does not fit in uint16 (both formats hold ids below 65536)");
  if (format == TokenFileFormat::Llmc && tokens.size() > static_cast<size_t>(INT32_MAX))
    throw DataError("token file " + path.string() + ": " + std::to_string(tokens.size()) +
                    " tokens do not fit llm.c's int32 token count");
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!file) throw IoError("cannot write " + tmp.string() + ": " + std::strerror(errno));
  bool ok = true;
  if (format == TokenFileFormat::Llmc) {
    int32_t header[kLlmcHeaderInts] = {};
    header[0] = kLlmcMagic;
    header[1] = kLlmcVersion;
    header[2] = static_cast<int32_t>(tokens.size());
    ok = std::fwrite(header, sizeof header, 1, file.get()) == 1;
  }
  std::vector<uint16_t> chunk(1 << 16);
  for (size_t i = 0; ok && i < tokens.size(); i += chunk.size()) {
    const size_t m = std::min(chunk.size(), tokens.size() - i);
    for (size_t j = 0; j < m; ++j) chunk[j] = static_cast<uint16_t>(tokens[i + j]);
    ok = std::fwrite(chunk.data(), sizeof(uint16_t), m, file.get()) == m;
  }
  ok = ok && std::fflush(file.get()) == 0;
  const int err = errno;
  if (std::fclose(file.release()) != 0) ok = false;
  if (!ok) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw IoError("cannot write " + tmp.string() + ": " + std::strerror(err));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw IoError("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
}

}  // namespace meshtrain
