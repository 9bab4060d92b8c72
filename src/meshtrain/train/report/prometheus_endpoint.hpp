#pragma once
// Live metrics for Prometheus and a liveness probe for Kubernetes
// (metrics.prometheus_port, docs/long-jobs.md). The lead worker serves, while
// the job runs:
//
//   GET /metrics   the Prometheus text exposition format 0.0.4
//                  (Content-Type: text/plain; version=0.0.4): the values of
//                  the newest metrics.jsonl step record (the same numbers,
//                  printed so they read back exactly) and the loop's progress
//   GET /healthz   200 "ok" while the training loop made progress within the
//                  heartbeat timeout, else 503 with the age
//   anything else  404 (405 for a method other than GET or HEAD)
//
// The metrics (gauges unless _total):
//   meshtrain_step                       steps the loop finished (updated every step)
//   meshtrain_logged_step                the step of the newest step record, which
//                                        the next five come from
//   meshtrain_loss                       its "loss"
//   meshtrain_learning_rate              its "lr"
//   meshtrain_grad_norm                  its "grad_norm"
//   meshtrain_tokens_per_second          its "tokens_per_s" (text; images:
//   / meshtrain_samples_per_second       "samples_per_s")
//   meshtrain_step_duration_seconds{rank="R"}  its "step_ms" / 1000 (the lead's
//                                        own; other ranks' when given)
//   meshtrain_last_checkpoint_step       the newest committed checkpoint (absent before one)
//   meshtrain_restarts_total             restarts of the job before this process
//   meshtrain_skipped_steps_total        updates skipped (a record's "skipped_steps", or the setter)
//   meshtrain_heartbeat_age_seconds      since the loop last made progress
//   meshtrain_heartbeat_timeout_seconds  the age past which /healthz fails
// A value not known yet (before the first record) is left out.
//
// The constructor binds and listens, so a port in use or a bad address is a
// ConfigError naming metrics.prometheus_port and the address before any
// training. One background thread serves with poll(): each connection gets
// one short GET (request head at most 8 KiB, 5 s to send it and take the
// answer) and is closed, so a slow or stalled client never holds up another
// nor the training loop, which only takes a mutex to copy a few numbers in.
// The destructor stops the thread (a byte down a pipe) and closes everything.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace meshtrain {

struct MetricsSection;

// /healthz's limit when parallel.heartbeat_timeout_s is 0 (off): generous
// enough for a step with an evaluation and a synchronous checkpoint.
inline constexpr double kDefaultHealthTimeoutS = 300;
// Before the loop's first step, the limit is at least this (setup, resume,
// rendezvous), as the supervisor allows the first heartbeat.
inline constexpr double kFirstStepHealthTimeoutS = 60;

struct PrometheusOptions {
  std::string address = "127.0.0.1";  // IPv4 or IPv6 address (or host name) to listen on
  int port = 0;                        // 0: any free port (see port())
  double heartbeat_timeout_s = kDefaultHealthTimeoutS;
  int rank = 0;          // the serving worker's rank: the label of its own step time
  int64_t restarts = 0;  // meshtrain_restarts_total
};

class PrometheusEndpoint {
 public:
  // Throws ConfigError when the address or port cannot be listened on.
  explicit PrometheusEndpoint(const PrometheusOptions& options);
  ~PrometheusEndpoint();
  PrometheusEndpoint(const PrometheusEndpoint&) = delete;
  PrometheusEndpoint& operator=(const PrometheusEndpoint&) = delete;

  int port() const { return port_; }  // the bound port (options.port, or the one picked for 0)

  // A step record as written to metrics.jsonl: its step (or a parameter-server
  // worker's "clock"), loss, lr, grad_norm, step_ms, tokens_per_s or
  // samples_per_s replace the previous record's (one it lacks is left out
  // of the scrape); its skipped_steps, when present, sets the counter. Other
  // keys are ignored.
  void update(const nlohmann::json& record);
  // The loop finished `step`: meshtrain_step, and the heartbeat's clock restarts.
  void progress(int64_t step);
  // A committed checkpoint's directory (<dir>/step_<S>): its step S.
  void checkpoint_committed(const std::string& dir);
  void set_checkpoint_step(int64_t step);
  void set_skipped_steps(int64_t skipped);
  // Another rank's step time, for meshtrain_step_duration_seconds{rank=...}.
  void set_rank_step_seconds(int rank, double seconds);

  // What GET /metrics and /healthz answer (also for tests).
  std::string metrics_text() const;
  bool healthy() const;

 private:
  struct State {
    int64_t step = -1;  // -1: no step yet
    int64_t logged_step = -1;
    std::optional<double> loss, lr, grad_norm, throughput;
    std::string throughput_name;  // meshtrain_tokens_per_second or meshtrain_samples_per_second
    std::map<int, double> step_seconds;
    int64_t checkpoint_step = -1;
    int64_t skipped_steps = 0;
    std::chrono::steady_clock::time_point last_progress;
    bool progressed = false;  // the first step's longer allowance until then
  };
  double heartbeat_age_locked(std::chrono::steady_clock::time_point now) const;
  double health_limit_locked() const;
  void serve();
  // The answer to a complete request head: /metrics, /healthz, or an error status.
  std::string response_to(const std::string& request) const;
  std::string healthz_response(bool head) const;  // 200 "ok", or 503 naming the stall

  const PrometheusOptions options_;
  int port_ = 0;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  mutable std::mutex mutex_;
  State state_;
  std::thread thread_;
};

// The endpoint the job's metrics section asks for on worker `rank` (the
// lead), or null when metrics.prometheus_port is 0. Its heartbeat timeout is
// `heartbeat_timeout_s` (parallel.heartbeat_timeout_s; kDefaultHealthTimeoutS
// when 0), its restart count the launcher's (restarts_from_environment).
std::unique_ptr<PrometheusEndpoint> open_prometheus_endpoint(const MetricsSection& metrics,
                                                             double heartbeat_timeout_s, int rank);

// How many times the job was restarted before this process:
// TORCHELASTIC_RESTART_COUNT under torchrun, else the k of the "-r<k>" that
// `meshtrain run` / `submit` append to MESHTRAIN_JOB_ID on a restart; 0.
int64_t restarts_from_environment();
int64_t restarts_from_job_id(const std::string& job_id);

}  // namespace meshtrain
