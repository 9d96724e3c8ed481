// The pool's clone networks (docs/network.md, "The pool's clones"), end to end: an image
// whose snapshot has a network device, warmed with the guest's address set (every clone
// wakes with it), served by a daemon that gives each clone a network namespace of its own
// with that TAP, made while it refills. Two clones with the same guest address fetch from
// an HTTP server beyond the host at once where the egress allows it; none reaches it with
// egress none; a PATCH changes that while the clone runs; GET /metrics counts each clone's
// traffic; acquire and release cycles, and a daemon killed with SIGKILL and started again,
// leave no namespace or link behind; a guest's port is reached through a forwarded host port
// and through the Host-routed proxy. The server stands for the outside world: a listener
// in a namespace of its own, routed through the host (tests/support/outside_network.h).
#include "tests/support/pool_network.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <set>
#include <string>
#include <vector>

#include "tests/support/eventually.h"
#include "tests/support/namespace_listener.h"
#include "tests/support/outside_network.h"
#include "tests/support/pool_daemon.h"
#include "vmm/http/client.h"
#include "vmm/network/clone_network_host.h"
#include "vmm/network/namespace_thread.h"
#include "vmm/network/nftables.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr auto kDeadline = 300s;
constexpr uint16_t kPort = 7080;
constexpr uint32_t kServer = 0x0AC90002;  // 10.201.0.2, beyond the host
const std::string kHttpReply = "HTTP/1.0 200 OK\r\nContent-Length: 14\r\n\r\nfrom the host\n";

// An HTTP GET of the server beyond the host, from sandbox `id`.
std::string fetch(const PoolDaemon& daemon, const std::string& id) {
  return sh(daemon, id,
            "timeout 10 wget -qO- http://" + ip(kServer) + ":" + std::to_string(kPort) + "/");
}

// What a TCP connection from the namespace `netns` to ADDRESS:PORT reads to its end; empty
// when it cannot connect.
std::string read_from(int netns, uint32_t address, uint16_t port) {
  std::string got;
  (void)network::in_namespace(netns, [&]() -> Status {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const timeval timeout{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    const sockaddr_in sin{.sin_family = AF_INET,
                          .sin_port = htons(port),
                          .sin_addr = {htonl(address)},
                          .sin_zero = {}};
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sin), sizeof sin) != 0) {
      return fail_errno("connect", errno);
    }
    char buffer[256];
    for (ssize_t n = 0; (n = ::read(fd.get(), buffer, sizeof buffer)) > 0;) {
      got.append(buffer, static_cast<size_t>(n));
    }
    return ok();
  });
  return got;
}

// What a TCP connection to 127.0.0.1:`port` that sends `request` reads back, to its end or
// for 5 s.
std::string http_exchange(uint16_t port, const std::string& request) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const timeval timeout{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const sockaddr_in sin{.sin_family = AF_INET,
                        .sin_port = htons(port),
                        .sin_addr = {htonl(INADDR_LOOPBACK)},
                        .sin_zero = {}};
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sin), sizeof sin) != 0 ||
      ::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    return "cannot connect: " + std::string(std::strerror(errno));
  }
  std::string got;
  char buffer[256];
  for (ssize_t n = 0; (n = ::read(fd.get(), buffer, sizeof buffer)) > 0;) {
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

class PoolNetworkTest : public PoolNetworkFixture {
 protected:
  Outside outside_{kServer, "do-pooltest"};
  Listener server_{outside_.netns(), kServer, kPort, Listener::Kind::kReply, kHttpReply};
};

TEST_F(PoolNetworkTest, ClonesWithOneAddressFetchAtOnceWhereTheirEgressAllowsIt) {
  start_daemon();
  const std::string allowed = ip(kServer) + "/32:" + std::to_string(kPort);
  register_image({{"ready", 2}, {"max", 3}, {"egress", {{"mode", "allow"}, {"allow", {allowed}}}}});
  const json a = acquire(*daemon_);
  const json b = acquire(*daemon_);
  ASSERT_TRUE(a.contains("network") && b.contains("network")) << a << b << daemon_->log();
  const std::string id_a = a["id"];
  const std::string id_b = b["id"];
  EXPECT_NE(a["network"]["address"], b["network"]["address"]);
  EXPECT_EQ(a["network"]["egress"]["mode"], "allow");
  for (const auto& id : {id_a, id_b}) {
    EXPECT_THAT(sh(*daemon_, id, "ip addr show eth0"), HasSubstr("192.168.241.2/29"));
  }

  // Both at once, each through its own namespace's NAT.
  auto first = std::async(std::launch::async, [&] { return fetch(*daemon_, id_a); });
  auto second = std::async(std::launch::async, [&] { return fetch(*daemon_, id_b); });
  EXPECT_EQ(first.get(), "exit 0: from the host\n") << daemon_->log();
  EXPECT_EQ(second.get(), "exit 0: from the host\n");
  EXPECT_EQ(server_.connections(), 2);

  // A PATCH takes effect while the clone runs; the other clone keeps its own policy.
  const auto patched =
      daemon_->request("PATCH", "/sandboxes/" + id_a + "/network", R"({"mode": "none"})");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(json::parse(patched.body)["network"]["egress"]["mode"], "none");
  EXPECT_THAT(fetch(*daemon_, id_a), Not(HasSubstr("from the host")));
  EXPECT_EQ(fetch(*daemon_, id_b), "exit 0: from the host\n");
  EXPECT_EQ(server_.connections(), 3);
  const auto bad = daemon_->request("PATCH", "/sandboxes/" + id_a + "/network",
                                    R"({"mode": "allow", "allow": ["10.0.0.1/8:99999"]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("from 1 to 65535"));
  EXPECT_EQ(
      daemon_->request("PATCH", "/sandboxes/sb-0000000000000000/network", R"({"mode": "all"})")
          .status,
      404);

  // What each clone sent and what its filter refused.
  const std::string metrics = daemon_->request("GET", "/metrics").body;
  EXPECT_GT(metric(metrics, "dsec_pool_sandbox_network_sent_packets_total", id_b), 0) << metrics;
  EXPECT_GT(metric(metrics, "dsec_pool_sandbox_network_received_bytes_total", id_b), 0);
  EXPECT_GT(metric(metrics, "dsec_pool_sandbox_network_dropped_packets_total", id_a), 0);

  // An acquire that asks for none gets none.
  const json c = acquire(*daemon_, {{"image", "net"}, {"egress", {{"mode", "none"}}}});
  ASSERT_TRUE(c.contains("id")) << daemon_->log();
  EXPECT_EQ(c["network"]["egress"]["mode"], "none");
  EXPECT_THAT(fetch(*daemon_, c["id"]), Not(HasSubstr("from the host")));
  EXPECT_EQ(server_.connections(), 3);

  // Cycles of acquire and release leave nothing behind once the daemon stopped.
  for (const auto& id : {id_a, id_b, c["id"].get<std::string>()}) {
    EXPECT_EQ(daemon_->request("DELETE", "/sandboxes/" + id).status, 204);
  }
  for (int cycle = 0; cycle < 4; ++cycle) {
    const json s = acquire(*daemon_);
    ASSERT_TRUE(s.contains("id")) << daemon_->log();
    EXPECT_EQ(daemon_->request("DELETE", "/sandboxes/" + s["id"].get<std::string>()).status, 204);
  }
  EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
  EXPECT_EQ(clone_networks_on_host(), before_);
}

// The image's resolver (docs/network.md, "DNS"): in the guest's resolv.conf before it is
// acquired, and reached on port 53 though the egress is none.
TEST_F(PoolNetworkTest, AnImagesResolverIsInTheGuestsResolvConfAndReachedOnPort53Alone) {
  const UniqueFd dns = udp_socket_in(outside_.netns(), kServer, 53);
  start_daemon();
  register_image({{"ready", 1}, {"max", 1}, {"egress", {{"resolver", ip(kServer)}}}});
  const json a = acquire(*daemon_);
  ASSERT_TRUE(a.contains("id")) << daemon_->log();
  const std::string id = a["id"];
  EXPECT_EQ(a["network"]["egress"]["resolver"], ip(kServer));
  EXPECT_EQ(sh(*daemon_, id, "cat /etc/resolv.conf"), "exit 0: nameserver " + ip(kServer) + "\n");
  (void)sh(*daemon_, id, "timeout 3 nslookup example.test");
  char query[512];
  EXPECT_GT(::recv(dns.get(), query, sizeof query, 0), 12) << "no query reached the resolver";
  EXPECT_THAT(fetch(*daemon_, id), Not(HasSubstr("from the host")));
  EXPECT_EQ(server_.connections(), 0);
  EXPECT_EQ(daemon_->request("DELETE", "/sandboxes/" + id).status, 204);
  EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
  EXPECT_EQ(clone_networks_on_host(), before_);
}

TEST_F(PoolNetworkTest, ADaemonKilledAndStartedAgainKeepsItsClonesNetworksAndPorts) {
  start_daemon();
  register_image({{"ready", 1}, {"max", 2}, {"egress", {{"mode", "all"}}}});
  const json a = acquire(*daemon_);
  ASSERT_TRUE(a.contains("id")) << daemon_->log();
  const std::string id = a["id"];
  EXPECT_EQ(fetch(*daemon_, id), "exit 0: from the host\n");
  // A guest's port forwarded, at the second host port (the first forward is let go).
  EXPECT_THAT(sh(*daemon_, id,
                 "(while true; do echo still forwarded | nc -l -p 8000; done) "
                 "</dev/null >/dev/null 2>&1 & echo started"),
              HasSubstr("started"));
  const auto forward = [&](const char* body) {
    const auto reply = daemon_->request("POST", "/sandboxes/" + id + "/ports", body);
    EXPECT_EQ(reply.status, 201) << reply.body;
    return reply.status == 201 ? json::parse(reply.body)["host_port"].get<uint16_t>() : 0;
  };
  ASSERT_EQ(forward(R"({"guest_port": 7999})"), network::kFirstForwardedPort);
  const uint16_t host_port = forward(R"({"guest_port": 8000})");
  ASSERT_EQ(host_port, network::kFirstForwardedPort + 1);
  const auto reaches_guest = [&] {
    return read_from(outside_.netns(), kServer - 1, host_port) == "still forwarded\n";
  };
  EXPECT_TRUE(eventually(reaches_guest, 60s));
  // The ready clone that refills is a network more.
  ASSERT_TRUE(
      eventually([&] { return clone_networks_on_host().size() >= before_.size() + 4; }, kDeadline));
  daemon_->stop(SIGKILL);

  start_daemon();
  const auto found = daemon_->request("GET", "/sandboxes/" + id);
  ASSERT_EQ(found.status, 200) << found.body << daemon_->log();
  EXPECT_EQ(json::parse(found.body)["network"]["egress"]["mode"], "all");
  EXPECT_EQ(fetch(*daemon_, id), "exit 0: from the host\n") << daemon_->log();
  // Its forwarded port too, at the host port it had.
  EXPECT_TRUE(eventually(reaches_guest, 60s)) << daemon_->log();
  const auto patched =
      daemon_->request("PATCH", "/sandboxes/" + id + "/network", R"({"mode": "none"})");
  EXPECT_EQ(patched.status, 200) << patched.body;
  EXPECT_THAT(fetch(*daemon_, id), Not(HasSubstr("from the host")));
  EXPECT_EQ(daemon_->request("DELETE", "/sandboxes/" + id).status, 204);
  EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
  EXPECT_EQ(clone_networks_on_host(), before_);
}

TEST_F(PoolNetworkTest, AGuestsPortIsReachedFromOutsideThroughAForwardedHostPortAndTheProxy) {
  start_daemon({"--proxy-listen", "127.0.0.1:0", "--proxy-domain", "sbx.test"});
  register_image({{"ready", 0}, {"max", 1}});  // egress none: nothing leaves, answers do
  const json a = acquire(*daemon_);
  ASSERT_TRUE(a.contains("id")) << daemon_->log();
  const std::string id = a["id"];
  EXPECT_THAT(sh(*daemon_, id,
                 "(while true; do echo hello from the guest | nc -l -p 8000; done) "
                 "</dev/null >/dev/null 2>&1 & echo started"),
              HasSubstr("started"));
  const auto forwarded =
      daemon_->request("POST", "/sandboxes/" + id + "/ports", R"({"guest_port": 8000})");
  ASSERT_EQ(forwarded.status, 201) << forwarded.body << daemon_->log();
  const json port = json::parse(forwarded.body);
  EXPECT_EQ(port["guest_port"], 8000);
  const auto host_port = port["host_port"].get<uint16_t>();
  EXPECT_GE(host_port, 30000);
  // From beyond the host, to the host's address on that side.
  std::string got;
  EXPECT_TRUE(eventually(
      [&] {
        got = read_from(outside_.netns(), kServer - 1, host_port);
        return got == "hello from the guest\n";
      },
      60s))
      << got;
  // Through the Host-routed proxy, which needs no forwarded port: the port it logged.
  const std::string log = daemon_->log();
  const std::string logged = "pool: proxying Host <port>-<sandbox id>.sbx.test on 127.0.0.1:";
  const auto at = log.find(logged);
  ASSERT_NE(at, std::string::npos) << log;
  const auto proxy_port = static_cast<uint16_t>(std::stoi(log.substr(at + logged.size())));
  const auto through_proxy = [&](const std::string& sandbox) {
    return http_exchange(proxy_port,
                         "GET / HTTP/1.1\r\nHost: 8000-" + sandbox + ".sbx.test\r\n\r\n");
  };
  EXPECT_TRUE(
      eventually([&] { return through_proxy(id).starts_with("hello from the guest\n"); }, 60s))
      << through_proxy(id);
  EXPECT_THAT(through_proxy("sb-0000"), HasSubstr("404"));
  const auto bad = daemon_->request("POST", "/sandboxes/" + id + "/ports", R"({"guest_port": 0})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("give 1 to 65535"));

  EXPECT_EQ(daemon_->request("DELETE", "/sandboxes/" + id).status, 204);
  EXPECT_TRUE(
      eventually([&] { return read_from(outside_.netns(), kServer - 1, host_port).empty(); }, 60s))
      << "the forward outlived its sandbox";
  EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
  EXPECT_EQ(clone_networks_on_host(), before_);
  auto nft = network::Nftables::open();
  ASSERT_TRUE(nft.has_value()) << nft.error().message();
  EXPECT_FALSE(nft->run("list table ip dsec_ports").has_value()) << "the host's table is left";
}

}  // namespace
}  // namespace dsec::test
