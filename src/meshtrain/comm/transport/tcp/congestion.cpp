#include "meshtrain/comm/transport/tcp/congestion.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <fstream>

#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::tcp {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "unknown";
  return line;
}

}  // namespace

CongestionChoice congestion_choice(std::string_view setting) {
  if (setting.empty()) return {std::string(kPreferredCongestion), false};
  if (setting == "system") return {"", false};
  return {std::string(setting), true};
}

bool set_congestion(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0;
}

std::string resolve_congestion(const CongestionChoice& choice) {
  if (choice.name.empty()) return "";
  Fd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) throw CommError("socket(): " + errno_text(errno));
  if (set_congestion(probe.get(), choice.name)) return choice.name;
  const std::string why = errno_text(errno);
  const std::string offered = "the kernel has " + first_line("/proc/sys/net/ipv4/tcp_available_congestion_control") +
                              "; without CAP_NET_ADMIN a process may choose " +
                              first_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  if (choice.required)
    throw ConfigError("MESHTRAIN_TCP_CONGESTION=" + choice.name + ": the kernel refused it (" + why + "); " +
                      offered + " (or set system for the kernel's default)");
  // Once per process: every transport (ranks as threads, process groups) would repeat it.
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    log_line("warning", "congestion control " + choice.name + " refused (" + why + "), using the kernel's default " +
             first_line("/proc/sys/net/ipv4/tcp_congestion_control") + "; " + offered);
  }
  return "";
}

}  // namespace meshtrain::comm::tcp
