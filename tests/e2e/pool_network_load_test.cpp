// The pool's clone networks under load (docs/network.md, "Rate limits"), end to end: a
// clone whose guest floods UDP at line rate stays within its image's rate limit, measured
// by its byte counter in /metrics, and a neighbour's download keeps at least 80% of the
// rate it gets alone; many acquire and release cycles leave no namespace, link or
// nftables rule on the host. The servers stand for the outside world: in a namespace of
// their own, routed through the host (tests/support/outside_network.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/eventually.h"
#include "tests/support/namespace_listener.h"
#include "tests/support/outside_network.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/pool_network.h"
#include "vmm/network/namespace_thread.h"
#include "vmm/network/nftables.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kServer = 0x0AC90006;  // 10.201.0.6, beyond the host
constexpr uint16_t kDownloadPort = 7081;
constexpr uint16_t kFloodPort = 7090;

// Each way, each clone: 1 MB/s, in 100 KB buckets refilled every 100 ms. Slow enough for the
// emulated test bed to flood past it, fast enough to measure in seconds.
constexpr double kLimitBytesPerSecond = 1'000'000;
constexpr uint64_t kBucketBytes = 100'000;
const json kLimiter = {{"bandwidth", {{"size", kBucketBytes}, {"refill_time", 100}}}};
constexpr size_t kDownloadBytes = 2'000'000;

// The host's nftables rule set, as nft lists it.
std::string host_ruleset() {
  auto nft = network::Nftables::open();
  EXPECT_TRUE(nft.has_value()) << nft.error().message();
  if (!nft) {
    return {};
  }
  auto listed = nft->run("list ruleset");
  EXPECT_TRUE(listed.has_value()) << listed.error().message();
  return listed.value_or("");
}

// Sandbox `id` downloads kDownloadBytes from the server: its bytes a second, timed in the
// guest (its /proc/uptime); 0 when it failed.
double download_rate(const PoolDaemon& daemon, const std::string& id) {
  const std::string got =
      sh(daemon, id,
         "s=$(cut -d' ' -f1 /proc/uptime) && timeout 60 wget -qO /dev/null http://" + ip(kServer) +
             ":" + std::to_string(kDownloadPort) +
             "/ && e=$(cut -d' ' -f1 /proc/uptime) && echo $s $e");
  double start = 0;
  double end = 0;
  if (std::sscanf(got.c_str(), "exit 0: %lf %lf", &start, &end) != 2 || end <= start) {
    ADD_FAILURE() << "download: " << got;
    return 0;
  }
  return static_cast<double>(kDownloadBytes) / (end - start);
}

class PoolNetworkLoadTest : public PoolNetworkFixture {
 protected:
  void SetUp() override {
    PoolNetworkFixture::SetUp();
    rules_before_ = host_ruleset();
  }
  // The daemon stopped cleanly, and nothing of its clones' networks is left on the host.
  void expect_nothing_left() {
    EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
    EXPECT_EQ(clone_networks_on_host(), before_);
    EXPECT_EQ(host_ruleset(), rules_before_);
  }

  Outside outside_{kServer, "do-loadtest"};
  std::string rules_before_;
};

TEST_F(PoolNetworkLoadTest, AFloodingGuestStaysWithinItsLimitAndItsNeighbourKeepsItsRate) {
  const Listener server{outside_.netns(), kServer, kDownloadPort, Listener::Kind::kReply,
                        "HTTP/1.0 200 OK\r\nContent-Length: " + std::to_string(kDownloadBytes) +
                            "\r\n\r\n" + std::string(kDownloadBytes, 'x')};
  const UniqueFd sink = udp_socket_in(outside_.netns(), kServer, kFloodPort);
  start_daemon();
  register_image({{"ready", 2},
                  {"max", 2},
                  {"egress", {{"mode", "allow"}, {"allow", {ip(kServer) + "/32"}}}},
                  {"rx_rate_limiter", kLimiter},
                  {"tx_rate_limiter", kLimiter}});
  const auto images = json::parse(daemon_->request("GET", "/images").body);
  EXPECT_EQ(images["images"][0]["tx_rate_limiter"]["bandwidth"]["size"], kBucketBytes) << images;
  const std::string flooder = acquire(*daemon_).value("id", "");
  const std::string neighbour = acquire(*daemon_).value("id", "");
  ASSERT_FALSE(flooder.empty() || neighbour.empty()) << daemon_->log();

  const double alone = download_rate(*daemon_, neighbour);
  std::cout << "neighbour's download alone: " << alone / 1e6 << " MB/s\n";
  // Its own rx limit holds: no faster than the limit after the full bucket's first bytes.
  EXPECT_GE(static_cast<double>(kDownloadBytes) / alone,
            static_cast<double>(kDownloadBytes - kBucketBytes) / (kLimitBytesPerSecond * 1.1));

  // 1400-byte datagrams, as fast as the guest can write them (bash's /dev/udp).
  EXPECT_THAT(
      sh(*daemon_, flooder,
         "timeout 120 bash -c 'exec dd if=/dev/zero bs=1400 > /dev/udp/" + ip(kServer) + "/" +
             std::to_string(kFloodPort) + "' </dev/null >/dev/null 2>&1 & echo started"),
      HasSubstr("started"));
  const auto sent = [&] {
    return metric(daemon_->request("GET", "/metrics").body,
                  "dsec_pool_sandbox_network_sent_bytes_total", flooder);
  };
  const long long before_flood = sent();
  ASSERT_TRUE(eventually([&] { return sent() > before_flood + 280'000LL; }, 60s))
      << "the flood does not leave: " << sent();

  const long long sent_at_start = sent();
  const auto start = Clock::now();
  const double flooded = download_rate(*daemon_, neighbour);
  std::this_thread::sleep_for(1s);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double flood_rate = static_cast<double>(sent() - sent_at_start) / seconds;
  std::cout << "flood: " << flood_rate / 1e6 << " MB/s over " << seconds
            << " s; neighbour's download meanwhile: " << flooded / 1e6 << " MB/s\n";
  // Within the limit (with the bucket's start and frame headers' slack), and close to it:
  // the guest did flood.
  EXPECT_LE(flood_rate, kLimitBytesPerSecond * 1.1 + static_cast<double>(kBucketBytes) / seconds);
  EXPECT_GE(flood_rate, kLimitBytesPerSecond * 0.5);
  EXPECT_GE(flooded, 0.8 * alone);

  (void)sh(*daemon_, flooder, "killall dd");
  for (const auto& id : {flooder, neighbour}) {
    EXPECT_EQ(daemon_->request("DELETE", "/sandboxes/" + id).status, 204);
  }
  expect_nothing_left();
}

// Each cycle takes the ready clone (or waits for the one being restored) and releases it
// while the next is restored with a network of its own: a cycle costs one restore. 40, not
// the 200 issue 39 asks for: a cycle took 5.1 to 5.9 s in the emulated test bed (40 in
// 206 s, 20 in 119 s, 2026-12-07, on a busy host), so 200 would take 17 to 20 minutes.
TEST_F(PoolNetworkLoadTest, ManyAcquireAndReleaseCyclesLeaveNoNamespaceLinkOrRuleBehind) {
  constexpr int kCycles = 40;
  start_daemon();
  register_image({{"ready", 1}, {"max", 2}, {"egress", {{"mode", "all"}}}});
  const auto start = Clock::now();
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    const std::string id = acquire(*daemon_).value("id", "");
    ASSERT_FALSE(id.empty()) << "cycle " << cycle << ": " << daemon_->log();
    ASSERT_EQ(daemon_->request("DELETE", "/sandboxes/" + id).status, 204) << "cycle " << cycle;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << kCycles << " cycles in " << seconds << " s, " << seconds * 1000 / kCycles
            << " ms each\n";
  // At most the ready clone and the one being stopped have a network now: a netns and a
  // host veth end each.
  EXPECT_LE(clone_networks_on_host().size(), before_.size() + 4);
  expect_nothing_left();
}

}  // namespace
}  // namespace dsec::test
