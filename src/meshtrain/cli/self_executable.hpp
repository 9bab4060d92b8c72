#pragma once
// The path of the running meshtrain binary, for starting more of itself
// (reducers, benchmark ranks).
#include <filesystem>
#include <string>

namespace meshtrain::cli {

inline std::string self_executable() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("meshtrain") : path.string();
}

}  // namespace meshtrain::cli
