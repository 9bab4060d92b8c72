#include "meshtrain/train/metrics_log.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw IoError(path + ": cannot create metrics directory: " + ec.message());
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw IoError(path + ": cannot open metrics file: " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw IoError(path_ + ": cannot write metrics: " + std::strerror(errno));
}

}  // namespace meshtrain
