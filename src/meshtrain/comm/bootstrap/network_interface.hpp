#pragma once
// MESHTRAIN_SOCKET_IFNAME, as NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME: the
// network interface whose address a rank listens on and advertises to its
// peers, on hosts with several (a fast cluster network beside a management
// one). A name matches exactly, or else as a prefix ("eth" finds eth0); the
// interface's first IPv4 address is used, else its first IPv6 one.
#include <string>

namespace meshtrain::comm {

// The address of interface `name`. Throws ConfigError naming the variable,
// the interface and the interfaces this host has, when there is no such
// interface or it has no address.
std::string interface_address(const std::string& name);

}  // namespace meshtrain::comm
