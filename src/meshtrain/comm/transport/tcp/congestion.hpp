#pragma once
// Which TCP congestion control the data sockets of a collective use.
//
// Why choose at all: a collective starts several flows into the same link at
// once, in bursts (the Reduction Server: each worker link and each reducer
// link carries one flow per peer in every exchange). BBR, which some hosts
// make their default, paces each flow at its own estimate of its share and
// needs several round trips to speed up once the other flows are done, so
// every exchange ends slowly; cubic (the Linux and Debian default) lets the
// flow that is left take the whole link at once. On the emulated 1 Gbit/s
// network of bench/ (bench/RESULTS.md) a 64 MiB Reduction Server all-reduce
// took 654-692 ms under BBR and 596-600 ms under cubic; a ring 857-894 and
// 845-848 ms.
//
// MESHTRAIN_TCP_CONGESTION (read by every rank and reducer for itself):
//   unset   cubic where the kernel lets this process choose it (root, or
//           cubic in net.ipv4.tcp_allowed_congestion_control), else the
//           kernel's default, with one log line saying so
//   system  the kernel's default (net.ipv4.tcp_congestion_control)
//   NAME    that algorithm; a kernel that refuses it is a ConfigError
#include <string>
#include <string_view>

namespace meshtrain::comm::tcp {

inline constexpr std::string_view kPreferredCongestion = "cubic";

struct CongestionChoice {
  std::string name;       // "" = the kernel's default
  bool required = false;  // false: fall back to the kernel's default when refused
};

// From MESHTRAIN_TCP_CONGESTION's value ("" when unset), as above.
CongestionChoice congestion_choice(std::string_view setting);

// Tries the choice on a scratch socket and returns the name to set on every
// data socket ("" = leave the kernel's default). Throws ConfigError, naming
// the algorithms the kernel offers, when a required choice is refused.
std::string resolve_congestion(const CongestionChoice& choice);

// Sets `name` on `fd`; false (errno kept) when the kernel refuses it.
bool set_congestion(int fd, const std::string& name);

}  // namespace meshtrain::comm::tcp
