#include "meshtrain/train/report/metrics_log.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

namespace {

// Rewrites path without the records of steps after from_step (atomically:
// a copy renamed over it). Lines that are not such records stay.
void drop_records_after(const std::string& path, int64_t from_step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  bool dropped = false;
  while (std::getline(in, line)) {
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.contains("step") && record["step"].is_number_integer() &&
        record["step"].get<int64_t>() > from_step) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (!dropped) return;
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  out << kept;
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0)
    throw IoError(path + ": cannot rewrite metrics: " + std::strerror(errno));
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, int64_t from_step, int rank,
                       std::unique_ptr<tensorboard::TensorBoardLog> tensorboard)
    : path_(path), rank_(rank), tensorboard_(std::move(tensorboard)) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw IoError(path + ": cannot create metrics directory: " + ec.message());
  if (from_step >= 0) drop_records_after(path, from_step);
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw IoError(path + ": cannot open metrics file: " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  nlohmann::json stamped = record;
  if (stamped.is_object()) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    stamped["rank"] = rank_;
    stamped["time"] = double(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) / 1e3;
  }
  std::string line = stamped.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw IoError(path_ + ": cannot write metrics: " + std::strerror(errno));
  if (tensorboard_) tensorboard_->write(stamped);
}

}  // namespace meshtrain
