#pragma once
// The JSONL metrics file: one JSON object per line, appended and flushed per
// record so a crash loses at most the line being written and a plotter can
// tail it while the run goes on.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace meshtrain {

class MetricsLog {
 public:
  // Opens path for appending (creating parent directories). A resumed run
  // appends to the file of the run it continues.
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace meshtrain
