#include "meshtrain/train/report/prometheus_endpoint.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <list>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxRequestBytes = 8192;          // a GET's request line and headers
constexpr auto kClientTime = std::chrono::seconds(5);  // to send the request and take the answer
constexpr auto kLingerTime = std::chrono::seconds(1);  // after the answer, for the client to close first
constexpr size_t kMaxClients = 64;                 // more wait in the listen backlog

// A value as Prometheus reads it: the shortest text that reads back as the
// same double (so a scrape equals metrics.jsonl's number exactly).
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, const std::string& value) {
  out += name;
  out += ' ';
  out += value;
  out += '\n';
}

void gauge(std::string& out, const char* name, const char* help, const std::string& value) {
  family(out, name, "gauge", help);
  sample(out, name, value);
}

int close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
  return -1;
}

// Binds and listens on address:port; the first of getaddrinfo's answers that
// works. ConfigError naming the keys on failure.
int listen_on(const std::string& address, int port) {
  const std::string where = "metrics.prometheus_port " + std::to_string(port) + " on metrics.prometheus_address '" +
                            address + "'";
  if (address.empty())
    throw ConfigError("metrics.prometheus_address is empty (metrics.prometheus_port " + std::to_string(port) +
                      "): name an address of this host, e.g. 127.0.0.1, or 0.0.0.0 for every interface");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(address.c_str(), service.c_str(), &hints, &found); rc != 0)
    throw ConfigError("cannot serve Prometheus metrics at " + where + ": " + gai_strerror(rc));
  int err = 0;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int one = 1;  // a restarted job rebinds past its predecessor's TIME_WAIT connections
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      err = errno;
      fd = close_quietly(fd);
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) return fd;
  std::string why = std::strerror(err);
  if (err == EADDRINUSE)
    why += " (another process holds the port: pick another metrics.prometheus_port, or 0 for none)";
  else if (err == EADDRNOTAVAIL)
    why += " (not an address of this host: 127.0.0.1 serves this host only, 0.0.0.0 every interface)";
  else if (err == EACCES)
    why += " (ports below 1024 need privileges)";
  throw ConfigError("cannot serve Prometheus metrics at " + where + ": " + why);
}

int bound_port(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  if (sa.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
  if (sa.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port);
  return 0;
}

std::string http_response(int code, const char* reason, const char* content_type, const std::string& body,
                          bool head, const char* extra_header = "") {
  std::string out = "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + content_type +
                    "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" +
                    extra_header + "\r\n";
  if (!head) out += body;
  return out;
}

constexpr const char* kTextPlain = "text/plain; charset=utf-8";

// One connection: its request as far as read, then its answer as far as sent.
struct Client {
  int fd = -1;
  enum class Phase { Reading, Writing, Lingering } phase = Phase::Reading;
  std::string in, out;
  size_t sent = 0;
  Clock::time_point deadline;
};

// The end of the request head (the blank line), or npos.
size_t head_end(const std::string& in) {
  const size_t crlf = in.find("\r\n\r\n");
  const size_t lf = in.find("\n\n");
  return std::min(crlf == std::string::npos ? crlf : crlf + 4, lf == std::string::npos ? lf : lf + 2);
}

}  // namespace

PrometheusEndpoint::PrometheusEndpoint(const PrometheusOptions& options) : options_(options) {
  if (options.port < 0 || options.port > 65535)
    throw ConfigError("metrics.prometheus_port " + std::to_string(options.port) +
                      " is not a port (0-65535; 0: any free one)");
  listen_fd_ = listen_on(options.address, options.port);
  port_ = bound_port(listen_fd_);
  if (pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    listen_fd_ = close_quietly(listen_fd_);
    throw IoError(std::string("metrics.prometheus_port: cannot create a pipe: ") + std::strerror(err));
  }
  state_.last_progress = Clock::now();  // setup counts as progress until the first step's allowance runs out
  // The thread takes no signals: SIGTERM and the like stay the training thread's.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  try {
    thread_ = std::thread([this] { serve(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    listen_fd_ = close_quietly(listen_fd_);
    stop_pipe_[0] = close_quietly(stop_pipe_[0]);
    stop_pipe_[1] = close_quietly(stop_pipe_[1]);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

PrometheusEndpoint::~PrometheusEndpoint() {
  const char byte = 1;
  while (write(stop_pipe_[1], &byte, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  close_quietly(listen_fd_);
  close_quietly(stop_pipe_[0]);
  close_quietly(stop_pipe_[1]);
}

void PrometheusEndpoint::update(const nlohmann::json& record) {
  const auto value = [&](const char* key) -> std::optional<double> {
    const auto it = record.find(key);
    if (it == record.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  const auto step_it = record.contains("step") ? record.find("step") : record.find("clock");
  const std::optional<double> loss = value("loss"), lr = value("lr"), grad_norm = value("grad_norm"),
                              step_ms = value("step_ms"), tokens = value("tokens_per_s"),
                              samples = value("samples_per_s"), skipped = value("skipped_steps");
  std::lock_guard lock(mutex_);
  // The record's values replace the last one's, a value it lacks (a skipped
  // step's loss) included: the scrape shows this record as it is.
  if (step_it != record.end() && step_it->is_number_integer()) {
    state_.logged_step = step_it->get<int64_t>();
    state_.step = std::max(state_.step, state_.logged_step);
  }
  state_.loss = loss;
  state_.lr = lr;
  state_.grad_norm = grad_norm;
  if (step_ms)
    state_.step_seconds[options_.rank] = *step_ms / 1e3;
  else
    state_.step_seconds.erase(options_.rank);
  state_.throughput = tokens ? tokens : samples;
  state_.throughput_name = tokens ? "meshtrain_tokens_per_second" : "meshtrain_samples_per_second";
  if (skipped) state_.skipped_steps = static_cast<int64_t>(*skipped);  // written only where counted: kept otherwise
}

void PrometheusEndpoint::progress(int64_t step) {
  const auto now = Clock::now();
  std::lock_guard lock(mutex_);
  state_.step = step;
  state_.last_progress = now;
  state_.progressed = true;
}

void PrometheusEndpoint::checkpoint_committed(const std::string& dir) {
  std::filesystem::path p(dir);
  if (p.filename().empty()) p = p.parent_path();  // a trailing slash
  const std::string name = p.filename().string();
  if (name.size() <= 5 || name.compare(0, 5, "step_") != 0) return;
  int64_t step = 0;
  const auto r = std::from_chars(name.data() + 5, name.data() + name.size(), step);
  if (r.ec == std::errc() && r.ptr == name.data() + name.size()) set_checkpoint_step(step);
}

void PrometheusEndpoint::set_checkpoint_step(int64_t step) {
  std::lock_guard lock(mutex_);
  state_.checkpoint_step = step;
}

void PrometheusEndpoint::set_skipped_steps(int64_t skipped) {
  std::lock_guard lock(mutex_);
  state_.skipped_steps = skipped;
}

void PrometheusEndpoint::set_rank_step_seconds(int rank, double seconds) {
  std::lock_guard lock(mutex_);
  state_.step_seconds[rank] = seconds;
}

double PrometheusEndpoint::heartbeat_age_locked(Clock::time_point now) const {
  return std::chrono::duration<double>(now - state_.last_progress).count();
}

double PrometheusEndpoint::health_limit_locked() const {
  return state_.progressed ? options_.heartbeat_timeout_s
                           : std::max(options_.heartbeat_timeout_s, kFirstStepHealthTimeoutS);
}

bool PrometheusEndpoint::healthy() const {
  const auto now = Clock::now();
  std::lock_guard lock(mutex_);
  return heartbeat_age_locked(now) <= health_limit_locked();
}

std::string PrometheusEndpoint::metrics_text() const {
  const auto now = Clock::now();
  State s;
  double age = 0, limit = 0;
  {
    std::lock_guard lock(mutex_);
    s = state_;
    age = heartbeat_age_locked(now);
    limit = health_limit_locked();
  }
  std::string out;
  out.reserve(2048);
  if (s.step >= 0)
    gauge(out, "meshtrain_step", "Training steps the loop has finished (a parameter-server worker: its clock)",
          std::to_string(s.step));
  if (s.logged_step >= 0)
    gauge(out, "meshtrain_logged_step",
          "Step of the newest metrics.jsonl step record, which the loss, learning rate, gradient norm, throughput "
          "and step duration come from",
          std::to_string(s.logged_step));
  if (s.loss)
    gauge(out, "meshtrain_loss", "Training loss at meshtrain_logged_step (metrics.jsonl loss)", number(*s.loss));
  if (s.lr)
    gauge(out, "meshtrain_learning_rate", "Learning rate at meshtrain_logged_step (metrics.jsonl lr)", number(*s.lr));
  if (s.grad_norm)
    gauge(out, "meshtrain_grad_norm", "Gradient norm at meshtrain_logged_step (metrics.jsonl grad_norm)",
          number(*s.grad_norm));
  if (s.throughput) {
    const bool tokens = s.throughput_name == "meshtrain_tokens_per_second";
    gauge(out, s.throughput_name.c_str(),
          tokens ? "Tokens per second at meshtrain_logged_step (metrics.jsonl tokens_per_s)"
                 : "Samples per second at meshtrain_logged_step (metrics.jsonl samples_per_s)",
          number(*s.throughput));
  }
  if (!s.step_seconds.empty()) {
    family(out, "meshtrain_step_duration_seconds", "gauge",
           "Wall time of a worker rank's step at meshtrain_logged_step (metrics.jsonl step_ms / 1000)");
    for (const auto& [rank, seconds] : s.step_seconds)
      sample(out, "meshtrain_step_duration_seconds{rank=\"" + std::to_string(rank) + "\"}", number(seconds));
  }
  if (s.checkpoint_step >= 0)
    gauge(out, "meshtrain_last_checkpoint_step", "Step of the newest committed checkpoint",
          std::to_string(s.checkpoint_step));
  family(out, "meshtrain_restarts_total", "counter", "Restarts of the job before this process");
  sample(out, "meshtrain_restarts_total", std::to_string(options_.restarts));
  family(out, "meshtrain_skipped_steps_total", "counter", "Training steps whose update was skipped");
  sample(out, "meshtrain_skipped_steps_total", std::to_string(s.skipped_steps));
  gauge(out, "meshtrain_heartbeat_age_seconds", "Seconds since the training loop last made progress", number(age));
  gauge(out, "meshtrain_heartbeat_timeout_seconds", "Heartbeat age past which /healthz answers 503", number(limit));
  return out;
}

std::string PrometheusEndpoint::healthz_response(bool head) const {
  const auto now = Clock::now();
  double age = 0, limit = 0;
  {
    std::lock_guard lock(mutex_);
    age = heartbeat_age_locked(now);
    limit = health_limit_locked();
  }
  if (age <= limit) return http_response(200, "OK", kTextPlain, "ok\n", head);
  char body[160];
  std::snprintf(body, sizeof body, "stalled: the training loop made no progress for %.1f s (limit %.0f s)\n", age,
                limit);
  return http_response(503, "Service Unavailable", kTextPlain, body, head);
}

std::string PrometheusEndpoint::response_to(const std::string& request) const {
  const std::string line = request.substr(0, request.find('\n'));
  char method[16] = {}, target[2048] = {}, version[16] = {};
  const bool parsed = std::sscanf(line.c_str(), "%15s %2047s %15s", method, target, version) == 3 &&
                      std::strncmp(version, "HTTP/1.", 7) == 0;
  if (!parsed) return http_response(400, "Bad Request", kTextPlain, "bad request\n", false);
  const bool head = std::strcmp(method, "HEAD") == 0;
  if (!head && std::strcmp(method, "GET") != 0)
    return http_response(405, "Method Not Allowed", kTextPlain, "method not allowed\n", false, "Allow: GET, HEAD\r\n");
  std::string path = target;
  path = path.substr(0, path.find('?'));
  if (path == "/metrics")
    return http_response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", metrics_text(), head);
  if (path == "/healthz") return healthz_response(head);
  return http_response(404, "Not Found", kTextPlain, "not found: this endpoint serves /metrics and /healthz\n", head);
}

namespace {

// Takes the connections waiting on the listening socket, up to kMaxClients in all.
void accept_clients(int listen_fd, std::list<Client>& clients) {
  while (clients.size() < kMaxClients) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a connection that went away; the next poll tells
    Client& c = clients.emplace_back();
    c.fd = fd;
    c.deadline = Clock::now() + kClientTime;
  }
}

// Reads what a reading (or lingering) client sent; once its request head is
// complete (or too long) sets its answer from `respond` and starts writing.
// False: the client is gone (or, lingering, closed after reading the answer).
template <class Respond>
bool read_from(Client& c, const Respond& respond) {
  char buf[4096];
  const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
  if (n > 0 && c.phase == Client::Phase::Reading) {
    c.in.append(buf, size_t(n));
    const size_t end = head_end(c.in);
    if (end != std::string::npos || c.in.size() > kMaxRequestBytes) {
      c.out = end == std::string::npos || end > kMaxRequestBytes
                  ? http_response(431, "Request Header Fields Too Large", kTextPlain, "request too large\n", false)
                  : respond(c.in);
      c.in.clear();
      c.phase = Client::Phase::Writing;
    }
  }
  return true;
}

// Sends what the socket takes of a writing client's answer; once all of it
// is sent, lingers. False: the connection failed.
bool write_to(Client& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    c.sent += size_t(n);
  }
  // Answered: let the client close first, so closing with its unread bytes
  // does not reset the connection under the answer.
  shutdown(c.fd, SHUT_WR);
  c.phase = Client::Phase::Lingering;
  c.deadline = std::min(c.deadline, Clock::now() + kLingerTime);
  return true;
}

}  // namespace

void PrometheusEndpoint::serve() {
  std::list<Client> clients;
  std::vector<pollfd> fds;
  std::vector<Client*> polled;
  const auto respond = [this](const std::string& request) { return response_to(request); };
  for (;;) {
    const auto now = Clock::now();
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      close_quietly(it->fd);
      it = clients.erase(it);
    }
    fds.clear();
    polled.clear();
    fds.push_back({stop_pipe_[0], POLLIN, 0});
    const bool accepting = clients.size() < kMaxClients;
    if (accepting) fds.push_back({listen_fd_, POLLIN, 0});
    Clock::time_point wake = now + std::chrono::seconds(1);
    for (Client& c : clients) {
      fds.push_back({c.fd, short(c.phase == Client::Phase::Writing ? POLLOUT : POLLIN), 0});
      polled.push_back(&c);
      wake = std::min(wake, c.deadline);
    }
    const int timeout_ms =
        int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1));
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "prometheus endpoint: poll: %s; no longer serving\n", std::strerror(errno));
      break;
    }
    if (fds[0].revents) break;  // the destructor
    const size_t first_client = accepting ? 2 : 1;
    if (accepting && (fds[1].revents & POLLIN)) accept_clients(listen_fd_, clients);
    for (size_t i = first_client; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Client& c = *polled[i - first_client];
      bool alive = c.phase == Client::Phase::Writing || read_from(c, respond);
      if (alive && c.phase == Client::Phase::Writing) alive = write_to(c);
      if (!alive) c.deadline = Clock::time_point::min();  // dropped at the top of the loop
    }
  }
  for (Client& c : clients) close_quietly(c.fd);
}

std::unique_ptr<PrometheusEndpoint> open_prometheus_endpoint(const MetricsSection& metrics,
                                                             double heartbeat_timeout_s, int rank) {
  if (metrics.prometheus_port <= 0) return nullptr;
  return std::make_unique<PrometheusEndpoint>(
      PrometheusOptions{.address = metrics.prometheus_address,
                        .port = static_cast<int>(metrics.prometheus_port),
                        .heartbeat_timeout_s = heartbeat_timeout_s > 0 ? heartbeat_timeout_s : kDefaultHealthTimeoutS,
                        .rank = rank,
                        .restarts = restarts_from_environment()});
}

int64_t restarts_from_job_id(const std::string& job_id) {
  const size_t at = job_id.rfind("-r");
  if (at == std::string::npos || at + 2 == job_id.size()) return 0;
  int64_t k = 0;
  const char* end = job_id.data() + job_id.size();
  const auto r = std::from_chars(job_id.data() + at + 2, end, k);
  return r.ec == std::errc() && r.ptr == end && k >= 0 ? k : 0;
}

int64_t restarts_from_environment() {
  if (const char* count = std::getenv("TORCHELASTIC_RESTART_COUNT"); count && *count) {
    int64_t k = 0;
    const char* end = count + std::strlen(count);
    const auto r = std::from_chars(count, end, k);
    if (r.ec == std::errc() && r.ptr == end && k >= 0) return k;
  }
  const char* id = std::getenv("MESHTRAIN_JOB_ID");
  return id ? restarts_from_job_id(id) : 0;
}

}  // namespace meshtrain
