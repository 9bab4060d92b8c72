// The Prometheus endpoint over real sockets: /metrics in the text format
// with metrics.jsonl's numbers, /healthz following the loop's progress, 404
// elsewhere, a stalled client holding up nobody, and bind errors naming the keys.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "meshtrain/core/error.hpp"
#include "meshtrain/train/report/prometheus_endpoint.hpp"

namespace meshtrain {
namespace {

using Clock = std::chrono::steady_clock;

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// Sends `request` as is and reads the answer up to the server's close.
Response http_exchange(int port, const std::string& request) {
  const int fd = connect_to(port);
  EXPECT_GE(fd, 0);
  Response r;
  if (fd < 0) return r;
  EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, size_t(n));
  close(fd);
  const size_t split = raw.find("\r\n\r\n");
  if (split == std::string::npos) return r;
  std::istringstream head(raw.substr(0, split));
  std::string line;
  std::getline(head, line);
  std::sscanf(line.c_str(), "HTTP/1.1 %d", &r.status);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    for (char& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
  }
  r.body = raw.substr(split + 4);
  return r;
}

Response get(int port, const std::string& path) {
  return http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n");
}

// The samples of a text exposition, checked for its format on the way:
// every family has its HELP and TYPE before its samples, every line parses,
// every value is a number. Keys: the name with its labels.
std::map<std::string, double> parse_exposition(const std::string& text) {
  static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"\})? (\S+)$)");
  static const std::regex help(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
  static const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter)$)");
  std::map<std::string, double> out;
  std::set<std::string> helped, typed;
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      EXPECT_TRUE(helped.insert(m[1]).second) << "two HELP lines: " << line;
    } else if (std::regex_match(line, m, type)) {
      EXPECT_TRUE(helped.count(m[1])) << "TYPE before HELP: " << line;
      EXPECT_TRUE(typed.insert(m[1]).second) << "two TYPE lines: " << line;
      if (m[2] == "counter") {
        EXPECT_TRUE(std::string(m[1]).ends_with("_total")) << line;
      }
    } else if (std::regex_match(line, m, sample)) {
      EXPECT_TRUE(typed.count(m[1])) << "sample before its TYPE: " << line;
      EXPECT_TRUE(std::string(m[1]).starts_with("meshtrain_")) << line;
      char* end = nullptr;
      const std::string value = m[3];
      const double v = std::strtod(value.c_str(), &end);
      EXPECT_EQ(*end, '\0') << "not a number: " << line;
      out[std::string(m[1]) + std::string(m[2])] = v;
    } else {
      ADD_FAILURE() << "not a line of the text format: '" << line << "'";
    }
  }
  return out;
}

TEST(PrometheusEndpoint, MetricsEqualTheStepRecord) {
  PrometheusEndpoint endpoint(PrometheusOptions{.port = 0, .rank = 0, .restarts = 2});
  ASSERT_GT(endpoint.port(), 0);
  // A record as the trainer writes it: the loss a float widened to double.
  const float loss = 3.14159274f;
  const nlohmann::json record = {{"step", 10},         {"loss", loss},           {"lr", 0.000123456789},
                                 {"grad_norm", 0.987654321}, {"step_ms", 12.3456789}, {"tokens_per_s", 123456.789},
                                 {"batch_size", 4},     {"elapsed_s", 1.5}};
  endpoint.update(record);
  endpoint.progress(11);
  endpoint.checkpoint_committed("/tmp/run/checkpoints/step_00000010");
  endpoint.set_rank_step_seconds(3, 0.25);

  const Response r = get(endpoint.port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.headers.at("content-length"), std::to_string(r.body.size()));
  const auto m = parse_exposition(r.body);
  EXPECT_EQ(m.at("meshtrain_step"), 11);
  EXPECT_EQ(m.at("meshtrain_logged_step"), 10);
  EXPECT_EQ(m.at("meshtrain_loss"), record["loss"].get<double>());  // exactly: the shortest round-trip text
  EXPECT_EQ(m.at("meshtrain_learning_rate"), 0.000123456789);
  EXPECT_EQ(m.at("meshtrain_grad_norm"), 0.987654321);
  EXPECT_EQ(m.at("meshtrain_tokens_per_second"), 123456.789);
  EXPECT_EQ(m.at("meshtrain_step_duration_seconds{rank=\"0\"}"), 12.3456789 / 1e3);
  EXPECT_EQ(m.at("meshtrain_step_duration_seconds{rank=\"3\"}"), 0.25);
  EXPECT_EQ(m.at("meshtrain_last_checkpoint_step"), 10);
  EXPECT_EQ(m.at("meshtrain_restarts_total"), 2);
  EXPECT_EQ(m.at("meshtrain_skipped_steps_total"), 0);
  EXPECT_GE(m.at("meshtrain_heartbeat_age_seconds"), 0);
  EXPECT_LT(m.at("meshtrain_heartbeat_age_seconds"), 60);
  EXPECT_EQ(m.at("meshtrain_heartbeat_timeout_seconds"), kDefaultHealthTimeoutS);
  EXPECT_FALSE(m.count("meshtrain_samples_per_second"));

  endpoint.set_skipped_steps(4);
  endpoint.update({{"step", 12}, {"loss", 2.5}, {"samples_per_s", 99.5}, {"skipped_steps", 5}});
  const auto later = parse_exposition(get(endpoint.port(), "/metrics").body);
  EXPECT_EQ(later.at("meshtrain_logged_step"), 12);
  EXPECT_EQ(later.at("meshtrain_loss"), 2.5);
  EXPECT_EQ(later.at("meshtrain_samples_per_second"), 99.5);
  EXPECT_FALSE(later.count("meshtrain_tokens_per_second"));
  EXPECT_EQ(later.at("meshtrain_skipped_steps_total"), 5);
  EXPECT_FALSE(later.count("meshtrain_learning_rate"));  // not in this record
  EXPECT_FALSE(later.count("meshtrain_step_duration_seconds{rank=\"0\"}"));
  EXPECT_EQ(later.at("meshtrain_step_duration_seconds{rank=\"3\"}"), 0.25);  // another rank's, kept
  EXPECT_EQ(later.at("meshtrain_step"), 12);  // never behind the record
  // A record without skipped_steps leaves the counter as it was.
  endpoint.update({{"step", 13}, {"loss", 2.25}});
  EXPECT_EQ(parse_exposition(endpoint.metrics_text()).at("meshtrain_skipped_steps_total"), 5);

  const Response head = http_exchange(endpoint.port(), "HEAD /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_GT(std::stoul(head.headers.at("content-length")), 0u);
}

TEST(PrometheusEndpoint, BeforeAnyRecordOnlyTheCountersAndHeartbeat) {
  PrometheusEndpoint endpoint(PrometheusOptions{});
  const auto m = parse_exposition(endpoint.metrics_text());
  EXPECT_EQ(m.size(), 4u);  // restarts, skipped steps, heartbeat age and timeout
  EXPECT_FALSE(m.count("meshtrain_loss"));
  EXPECT_FALSE(m.count("meshtrain_last_checkpoint_step"));
  // A parameter-server worker's record counts its clock.
  endpoint.update({{"clock", 7}, {"server_step", 20}, {"loss", 1.25}, {"step_ms", 4.0}});
  const auto ps = parse_exposition(endpoint.metrics_text());
  EXPECT_EQ(ps.at("meshtrain_logged_step"), 7);
  EXPECT_EQ(ps.at("meshtrain_loss"), 1.25);
}

TEST(PrometheusEndpoint, NonFiniteValuesInTheTextFormat) {
  PrometheusEndpoint endpoint(PrometheusOptions{});
  endpoint.update({{"step", 1}, {"loss", std::numeric_limits<double>::quiet_NaN()},
                   {"grad_norm", std::numeric_limits<double>::infinity()}});
  const std::string text = endpoint.metrics_text();
  EXPECT_NE(text.find("\nmeshtrain_loss NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nmeshtrain_grad_norm +Inf\n"), std::string::npos) << text;
}

TEST(PrometheusEndpoint, HealthzFollowsTheLoopsProgress) {
  PrometheusEndpoint endpoint(PrometheusOptions{.heartbeat_timeout_s = 0.2});
  // Before the first step the allowance is at least a minute.
  Response r = get(endpoint.port(), "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  EXPECT_EQ(parse_exposition(endpoint.metrics_text()).at("meshtrain_heartbeat_timeout_seconds"),
            kFirstStepHealthTimeoutS);
  endpoint.progress(1);
  EXPECT_TRUE(endpoint.healthy());
  EXPECT_EQ(get(endpoint.port(), "/healthz").status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE(endpoint.healthy());
  r = get(endpoint.port(), "/healthz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("no progress"), std::string::npos) << r.body;
  EXPECT_GE(parse_exposition(endpoint.metrics_text()).at("meshtrain_heartbeat_age_seconds"), 0.4);
  endpoint.progress(2);
  EXPECT_EQ(get(endpoint.port(), "/healthz").status, 200);
  EXPECT_EQ(get(endpoint.port(), "/healthz?verbose=1").status, 200);
}

TEST(PrometheusEndpoint, OtherPathsAndMethodsAndMalformedRequests) {
  PrometheusEndpoint endpoint(PrometheusOptions{});
  EXPECT_EQ(get(endpoint.port(), "/nope").status, 404);
  EXPECT_EQ(get(endpoint.port(), "/").status, 404);
  EXPECT_EQ(get(endpoint.port(), "/metrics/x").status, 404);
  const Response post = http_exchange(endpoint.port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers.at("allow"), "GET, HEAD");
  EXPECT_EQ(http_exchange(endpoint.port(), "hello\r\n\r\n").status, 400);
  EXPECT_EQ(http_exchange(endpoint.port(), "GET /metrics SPDY/3\r\n\r\n").status, 400);
  // HTTP/1.0 and bare line feeds are answered too.
  EXPECT_EQ(http_exchange(endpoint.port(), "GET /healthz HTTP/1.0\n\n").status, 200);
  // A request head past the cap is refused, not buffered.
  const std::string huge = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(20000, 'a') + "\r\n\r\n";
  EXPECT_EQ(http_exchange(endpoint.port(), huge).status, 431);
  EXPECT_EQ(get(endpoint.port(), "/metrics").status, 200);  // still serving
}

TEST(PrometheusEndpoint, AStalledClientHoldsUpNobody) {
  auto endpoint = std::make_unique<PrometheusEndpoint>(PrometheusOptions{});
  // One sends half a request and waits, another connects and sends nothing.
  const int half = connect_to(endpoint->port());
  const int silent = connect_to(endpoint->port());
  ASSERT_GE(half, 0);
  ASSERT_GE(silent, 0);
  ASSERT_EQ(send(half, "GET /metr", 9, MSG_NOSIGNAL), 9);
  const auto t0 = Clock::now();
  EXPECT_EQ(get(endpoint->port(), "/metrics").status, 200);
  EXPECT_EQ(get(endpoint->port(), "/healthz").status, 200);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  // The server gives up on the stalled ones after its client time (5 s): they see the close.
  char buf[64];
  EXPECT_EQ(recv(silent, buf, sizeof buf, 0), 0);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(9));
  // The destructor does not wait for a stalled client either.
  const int another = connect_to(endpoint->port());
  ASSERT_GE(another, 0);
  const auto t1 = Clock::now();
  endpoint.reset();
  EXPECT_LT(Clock::now() - t1, std::chrono::seconds(2));
  EXPECT_LE(recv(another, buf, sizeof buf, 0), 0);  // closed (or reset), unanswered
  close(half);
  close(silent);
  close(another);
}

TEST(PrometheusEndpoint, APortInUseOrABadAddressNamesTheKeys) {
  PrometheusEndpoint first(PrometheusOptions{});
  try {
    PrometheusEndpoint second(PrometheusOptions{.port = first.port()});
    FAIL() << "a second endpoint bound port " << first.port();
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("metrics.prometheus_port " + std::to_string(first.port())), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1"), std::string::npos) << what;
    EXPECT_NE(what.find("in use"), std::string::npos) << what;
  }
  // 192.0.2.1 (TEST-NET-1) is no address of this host.
  try {
    PrometheusEndpoint elsewhere(PrometheusOptions{.address = "192.0.2.1"});
    FAIL() << "bound 192.0.2.1";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.prometheus_address '192.0.2.1'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PrometheusEndpoint(PrometheusOptions{.address = ""}), ConfigError);
}

TEST(PrometheusEndpoint, ListensOnEveryInterfaceWhenAsked) {
  PrometheusEndpoint endpoint(PrometheusOptions{.address = "0.0.0.0"});
  EXPECT_EQ(get(endpoint.port(), "/healthz").status, 200);  // reached through loopback
}

TEST(PrometheusEndpoint, RestartsFromTheJobId) {
  EXPECT_EQ(restarts_from_job_id("job-123-abcdef12"), 0);
  EXPECT_EQ(restarts_from_job_id("job-123-abcdef12-r2"), 2);
  EXPECT_EQ(restarts_from_job_id("submit-9-0011aabb-r17"), 17);
  EXPECT_EQ(restarts_from_job_id("job-r"), 0);
  EXPECT_EQ(restarts_from_job_id("my-run-rx"), 0);
  EXPECT_EQ(restarts_from_job_id(""), 0);
}

}  // namespace
}  // namespace meshtrain
