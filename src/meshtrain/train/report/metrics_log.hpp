#pragma once
// The JSONL metrics file: one JSON object per line, appended and flushed per
// record so a crash loses at most the line being written and a plotter can
// tail it while the run goes on. Every record carries the writer's "rank"
// and "time" (seconds since the Unix epoch, to the millisecond), so lines
// from several files can be merged and lined up with other logs. Given a
// TensorBoardLog, it passes each stamped record on (metrics.tensorboard).
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "meshtrain/train/report/tensorboard/tensorboard_log.hpp"

namespace meshtrain {

class MetricsLog {
 public:
  // Opens path for appending (creating parent directories). A resumed run
  // appends to the file of the run it continues; given `from_step`, the
  // records of steps after it are dropped first (a run restarted from the
  // checkpoint of that step logs them again; 0: a run starting over).
  explicit MetricsLog(const std::string& path, int64_t from_step = -1, int rank = 0,
                      std::unique_ptr<tensorboard::TensorBoardLog> tensorboard = nullptr);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int rank_ = 0;
  std::unique_ptr<tensorboard::TensorBoardLog> tensorboard_;
};

}  // namespace meshtrain
