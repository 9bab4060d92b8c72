#include "meshtrain/comm/bootstrap/network_interface.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

struct Interface {
  std::vector<std::string> ipv4, ipv6;
};

// Every interface of this host, in the kernel's order, with its addresses.
std::vector<std::pair<std::string, Interface>> host_interfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw ConfigError("MESHTRAIN_SOCKET_IFNAME: cannot list this host's network interfaces");
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> owner(list, freeifaddrs);
  std::vector<std::pair<std::string, Interface>> out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == a->ifa_name; });
    if (it == out.end()) it = out.insert(out.end(), {a->ifa_name, {}});
    if (!a->ifa_addr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
      it->second.ipv4.push_back(text);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope id to be dialled
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
      it->second.ipv6.push_back(text);
    }
  }
  return out;
}

}  // namespace

std::string interface_address(const std::string& name) {
  const auto interfaces = host_interfaces();
  const auto named = [&](auto pred) { return std::find_if(interfaces.begin(), interfaces.end(), pred); };
  auto match = named([&](const auto& i) { return i.first == name; });
  if (match == interfaces.end() && !name.empty())
    match = named([&](const auto& i) { return i.first.rfind(name, 0) == 0; });
  if (match == interfaces.end()) {
    std::string names;
    for (const auto& i : interfaces) names += (names.empty() ? "" : ", ") + i.first;
    throw ConfigError("MESHTRAIN_SOCKET_IFNAME='" + name + "': this host has no such network interface (it has: " +
                      names + ")");
  }
  const Interface& i = match->second;
  if (!i.ipv4.empty()) return i.ipv4.front();
  if (!i.ipv6.empty()) return i.ipv6.front();
  throw ConfigError("MESHTRAIN_SOCKET_IFNAME='" + name + "': interface " + match->first + " has no address");
}

}  // namespace meshtrain::comm
