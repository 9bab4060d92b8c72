// The congestion-control choice of the TCP transport (tcp/congestion.hpp).
#include "meshtrain/comm/transport/tcp/congestion.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>

#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "meshtrain/core/error.hpp"
#include "tcp_test_util.hpp"

namespace meshtrain::comm::tcp {
namespace {

std::string congestion_of(int fd) {
  char name[32] = {};
  socklen_t len = sizeof name;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "?";
  return std::string(name, strnlen(name, len));
}

TEST(CongestionChoice, UnsetPrefersCubicSystemKeepsTheDefaultANameIsRequired) {
  const CongestionChoice unset = congestion_choice("");
  EXPECT_EQ(unset.name, "cubic");
  EXPECT_FALSE(unset.required);
  const CongestionChoice system = congestion_choice("system");
  EXPECT_EQ(system.name, "");
  EXPECT_FALSE(system.required);
  const CongestionChoice reno = congestion_choice("reno");
  EXPECT_EQ(reno.name, "reno");
  EXPECT_TRUE(reno.required);
}

// reno is always built in and always allowed, privileged or not.
TEST(CongestionChoice, ADataSocketGetsTheResolvedAlgorithm) {
  EXPECT_EQ(resolve_congestion(congestion_choice("reno")), "reno");
  Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_TRUE(fd.valid());
  tune_data_socket(fd.get(), "reno");
  EXPECT_EQ(congestion_of(fd.get()), "reno");
}

TEST(CongestionChoice, SystemLeavesTheKernelsDefault) {
  EXPECT_EQ(resolve_congestion(congestion_choice("system")), "");
  Fd plain(::socket(AF_INET, SOCK_STREAM, 0)), tuned(::socket(AF_INET, SOCK_STREAM, 0));
  tune_data_socket(tuned.get(), "");
  EXPECT_EQ(congestion_of(tuned.get()), congestion_of(plain.get()));
}

TEST(CongestionChoice, ARefusedRequiredAlgorithmIsAConfigErrorNamingWhatTheKernelHas) {
  try {
    resolve_congestion(congestion_choice("no-such-algorithm"));
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MESHTRAIN_TCP_CONGESTION=no-such-algorithm"), std::string::npos) << what;
    EXPECT_NE(what.find("the kernel has"), std::string::npos) << what;
    EXPECT_NE(what.find("reno"), std::string::npos) << what;
  }
}

TEST(CongestionChoice, ARefusedPreferenceFallsBackToTheKernelsDefault) {
  EXPECT_EQ(resolve_congestion({"no-such-algorithm", false}), "");
}

// The transport refuses to start, before any rendezvous, rather than run
// with an algorithm the user did not ask for.
TEST(CongestionChoice, ATransportWithARefusedAlgorithmFailsBeforeConnecting) {
  TcpOptions o = tcp_test::rank_options(0, 2, 1);  // nothing listens on port 1
  o.congestion = "no-such-algorithm";
  EXPECT_THROW(connect_tcp(o), ConfigError);
}

TEST(CongestionChoice, RanksOnRenoExchangeData) {
  rendezvous::TcpStore store(tcp_test::store_options(2));
  std::vector<int> got(2, -1);
  const auto errors = tcp_test::run_ranks_collect(
      store, 2,
      [&](int rank, Transport& t) {
        const int mine = rank + 10;
        int theirs = -1;
        SendOp s{1 - rank, &mine, sizeof mine};
        RecvOp r{1 - rank, &theirs, sizeof theirs, nullptr};
        t.exchange({&s, 1}, {&r, 1});
        got[size_t(rank)] = theirs;
      },
      [](int, TcpOptions& o) { o.congestion = "reno"; });
  EXPECT_EQ(tcp_test::what_of(errors[0]) + tcp_test::what_of(errors[1]), "");
  EXPECT_EQ(got, (std::vector<int>{11, 10}));
}

}  // namespace
}  // namespace meshtrain::comm::tcp
