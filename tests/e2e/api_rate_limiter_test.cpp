// Firecracker's rate limiters end to end, as the guest measures them: a drive and a network
// interface configured through the API hold their bandwidth within 10%, and what is not
// limited (another drive of the same VM, a neighbour VM on its own TAP) is not held back.
// The guest times its own work (its clock, /proc/uptime); the host's time around the
// command, which adds the agent's round trip, is reported beside it.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/api_sandbox.h"
#include "tests/support/dsec_vmm.h"
#include "tests/support/run_command.h"
#include "tests/support/sandbox.h"
#include "vmm/common/unique_fd.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kReadyDeadline = std::chrono::seconds(300);

// Numbers a guest command printed on its last line, in order.
std::vector<double> numbers_of(const std::string& out) {
  std::vector<double> values;
  if (out.size() < 2) return values;
  std::istringstream in(out.substr(out.rfind('\n', out.size() - 2) + 1));
  for (double v = 0; in >> v;) values.push_back(v);
  return values;
}

// Firecracker's rate limiter on a drive, as the guest sees it: O_DIRECT reads from a drive
// limited to 2 MiB/s take as long as the limit says (within 10%), and the same reads from
// an unlimited drive on the same VM are not held back. The bucket holds half a second of
// the rate, so that the test bed's uneven pace does not lose the limiter time; a first
// read empties it, and the second is timed. The reads are 64 KiB, under the bucket's
// size.
TEST(ApiRateLimiter, ALimitedDriveReadsAtItsBandwidthAndAnUnlimitedOneIsNotHeldBack) {
  constexpr uint64_t kBytesPerSecond = 2 << 20;
  constexpr uint64_t kRead = 16 << 20;
  const auto work = local_dir("dsec-rate-limit");
  std::filesystem::create_directories(work);
  for (const char* name : {"limited.img", "free.img"}) {
    std::ofstream(work / name).close();
    std::filesystem::resize_file(work / name, kRead);
  }
  auto vmm = Sandbox::serve();
  std::string why;
  ASSERT_TRUE(vmm->wait_for_api(30s, why)) << why;
  const auto client = api_of(*vmm);
  ASSERT_TRUE(client.send("PUT", "/boot-source", default_image_boot_source()));
  ASSERT_TRUE(client.send("PUT", "/vsock", {{"guest_cid", 3}, {"uds_path", vmm->vsock_path()}}));
  // Put first, so the guest's /dev/vda.
  ASSERT_TRUE(client.send(
      "PUT", "/drives/limited",
      {{"drive_id", "limited"},
       {"path_on_host", (work / "limited.img").string()},
       {"is_root_device", false},
       {"rate_limiter", {{"bandwidth", {{"size", kBytesPerSecond / 2}, {"refill_time", 500}}}}}}));
  ASSERT_TRUE(client.send("PUT", "/drives/free",
                          {{"drive_id", "free"},
                           {"path_on_host", (work / "free.img").string()},
                           {"is_root_device", false}}));
  ASSERT_TRUE(client.send("PUT", "/actions", {{"action_type", "InstanceStart"}}))
      << vmm->describe();
  ASSERT_TRUE(vmm->wait_ready(kReadyDeadline, why)) << why;

  // Seconds a guest command took by the host's clock, and by the guest's.
  struct Took {
    double host = 0;
    double guest = 0;
  };
  const auto timed = [&](const std::string& command) {
    const auto start = std::chrono::steady_clock::now();
    const auto ran = sh(*vmm, "a=$(cut -d' ' -f1 /proc/uptime); " + command +
                                  " || exit 1; b=$(cut -d' ' -f1 /proc/uptime); echo $a $b");
    const std::chrono::duration<double> host = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(ran.ok()) << ran.out << vmm->describe();
    double guest_start = 0;
    double guest_end = 0;
    std::istringstream(ran.out) >> guest_start >> guest_end;
    return Took{host.count(), guest_end - guest_start};
  };
  const auto read = [&](const std::string& device, uint64_t bytes) {
    return timed("dd if=" + device + " of=/dev/null bs=64k count=" + std::to_string(bytes >> 16) +
                 " iflag=direct 2>/dev/null");
  };
  read("/dev/vda", kBytesPerSecond);  // the bucket's start, and as much again
  const Took limited = read("/dev/vda", kRead);
  const Took free = read("/dev/vdb", kRead);
  const double expected = static_cast<double>(kRead) / kBytesPerSecond;
  const std::string figures = fmt::format(
      "limited: {:.2f} s by the host's clock ({:.2f} s by the guest's), unlimited: {:.2f} s "
      "({:.2f} s); expected {:.2f} s",
      limited.host, limited.guest, free.host, free.guest, expected);
  EXPECT_NEAR(limited.guest, expected, expected * 0.1) << figures;
  // The limit paces a read to at least `expected`, whatever the load; an unlimited read
  // goes at the test bed's speed, which a loaded CI machine halves (about 4 s where 2 s is
  // usual, seen in CI): well under the paced time is what tells them apart.
  constexpr double kUnpaced = 0.7;
  EXPECT_LT(free.guest, limited.guest * kUnpaced) << "the unlimited drive was held back: " << figures;
  std::cout << figures << "\n";
  // The limit shows in the VM's configuration.
  const auto config = client.get("/vm/config");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->at("drives")[0].at("rate_limiter").at("bandwidth").at("size"),
            kBytesPerSecond / 2);
  EXPECT_TRUE(config->at("drives")[1].at("rate_limiter").is_null());
  // A PATCH lifts it on the running VM (through the API thread's seccomp filter).
  ASSERT_TRUE(client.send("PATCH", "/drives/limited",
                          {{"drive_id", "limited"},
                           {"rate_limiter", {{"bandwidth", {{"size", 0}, {"refill_time", 0}}}}}}))
      << vmm->describe();
  const Took lifted = read("/dev/vda", kRead);
  EXPECT_LT(lifted.guest, limited.guest * kUnpaced)
      << "still limited after the PATCH: " << lifted.guest << " s; " << figures;
  std::filesystem::remove_all(work);
}

// The host's end of one TCP transfer with a guest, on the host's address of a TAP: it
// listens from the start, takes one connection, and either reads until the guest closes
// (the guest sends) or writes `bytes` and closes (the guest receives).
class HostEnd {
 public:
  static constexpr uint16_t kPort = 5201;

  explicit HostEnd(const std::string& ip)
      : listener_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(kPort);
    const int one = 1;
    if (!listener_ || ::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1 ||
        ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_.get(), 1) != 0) {
      ADD_FAILURE() << "cannot listen on " << ip << ":" << kPort << ": " << std::strerror(errno);
      listener_.reset();
    }
  }

  // Bytes read until the guest closed; -1 (the test failed) if no guest came or a read
  // failed.
  int64_t sink() {
    const UniqueFd conn = accept_one();
    if (!conn) return -1;
    std::vector<char> buffer(1 << 16);
    int64_t total = 0;
    for (;;) {
      const ssize_t n = ::read(conn.get(), buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ADD_FAILURE() << "reading the guest's stream: " << std::strerror(errno);
        return -1;
      }
      if (n == 0) return total;
      total += n;
    }
  }

  // Writes `bytes` to the guest that connects, then closes; false (the test failed) if no
  // guest came or a write failed.
  bool source(uint64_t bytes) {
    const UniqueFd conn = accept_one();
    if (!conn) return false;
    const std::vector<char> buffer(1 << 16, 'x');
    while (bytes > 0) {
      const ssize_t n =
          ::send(conn.get(), buffer.data(), std::min<uint64_t>(bytes, buffer.size()), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ADD_FAILURE() << "writing to the guest: " << std::strerror(errno);
        return false;
      }
      bytes -= static_cast<uint64_t>(n);
    }
    return true;
  }

 private:
  UniqueFd accept_one() {
    pollfd p{listener_.get(), POLLIN, 0};
    if (!listener_ || ::poll(&p, 1, 120'000) != 1) {
      ADD_FAILURE() << "no guest connected within 120 s";
      return UniqueFd();
    }
    return UniqueFd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }

  UniqueFd listener_;
};

// A `dsec-vmm serve` booting the default image through its API with one network interface
// on a TAP of its own, eth0 addressed 10.<net>.<n>.2/24 in the guest and .1 on the host;
// `interface` holds the PUT's limiters. The TAP goes with it.
class NetVm {
 public:
  NetVm(const std::string& name, int net, nlohmann::json interface) {
    const int n = 20 + static_cast<int>(::getpid() % 200);
    tap_ = name + std::to_string(::getpid() % 10000);
    const std::string prefix = fmt::format("10.{}.{}.", net, n);
    host_ip_ = prefix + "1";
    const auto made =
        run_command("ip tuntap add dev " + tap_ + " mode tap && ip addr add " + host_ip_ +
                    "/24 dev " + tap_ + " && ip link set dev " + tap_ + " up 2>&1");
    if (made.exit_status != 0) {
      ADD_FAILURE() << "making TAP " << tap_ << ": " << made.output;
      return;
    }
    vm_ = Sandbox::serve();
    std::string why;
    if (!vm_->wait_for_api(30s, why)) {
      ADD_FAILURE() << why;
      return;
    }
    const auto client = api_of(*vm_);
    interface["iface_id"] = "eth0";
    interface["host_dev_name"] = tap_;
    interface["guest_mac"] = fmt::format("06:00:0a:{:02x}:{:02x}:02", net, n);
    if (!client.send("PUT", "/boot-source", default_image_boot_source()) ||
        !client.send("PUT", "/vsock", {{"guest_cid", 3}, {"uds_path", vm_->vsock_path()}}) ||
        !client.send("PUT", "/network-interfaces/eth0", interface) ||
        !client.send("PUT", "/actions", {{"action_type", "InstanceStart"}})) {
      ADD_FAILURE() << "configuring the VM through its API\n" << vm_->describe();
      return;
    }
    if (!vm_->wait_ready(kReadyDeadline, why)) {
      ADD_FAILURE() << why;
      return;
    }
    const ShellOutput up = sh(*vm_, "ip addr add " + prefix + "2/24 dev eth0 && ip link set eth0 " +
                                        "up && ping -c 1 -W 30 " + host_ip_ + " 2>&1");
    EXPECT_TRUE(up.ok()) << up.out << vm_->describe();
    ready_ = up.ok();
  }
  NetVm(const NetVm&) = delete;
  NetVm& operator=(const NetVm&) = delete;
  ~NetVm() {
    vm_.reset();
    (void)run_command("ip link del " + tap_ + " 2>/dev/null");
  }

  bool ready() const { return ready_; }
  Sandbox& vm() { return *vm_; }

  // One transfer of `bytes` over TCP between the guest and the host, in the direction
  // `send` says (true: the guest sends), timed by the guest; the rate is the bytes its eth0
  // counted on the wire (frames, headers included, as the limiter counts them) less
  // `burst` (what a full bucket lets through at once), over the guest's seconds.
  struct Transfer {
    double guest_s = 0;
    double host_s = 0;
    uint64_t wire_bytes = 0;
    double rate(uint64_t burst) const {
      return guest_s > 0 ? static_cast<double>(wire_bytes - std::min(burst, wire_bytes)) / guest_s
                         : 0;
    }
  };
  Transfer transfer(bool send, uint64_t bytes) {
    HostEnd host(host_ip_);
    const std::string counter = send ? "tx_bytes" : "rx_bytes";
    const std::string nc = "nc " + host_ip_ + " " + std::to_string(HostEnd::kPort);
    const std::string move =
        send ? fmt::format("dd if=/dev/zero bs=64k count={} 2>/dev/null | {}", bytes >> 16, nc)
             : nc + " </dev/null | wc -c";
    const std::string command = "s=/sys/class/net/eth0/statistics/" + counter +
                                "; b=$(cat $s); a=$(cut -d' ' -f1 /proc/uptime); " + move +
                                " || exit 1; c=$(cut -d' ' -f1 /proc/uptime); d=$(cat $s); "
                                "echo $a $c $b $d";
    auto host_side = std::async(std::launch::async, [&host, send, bytes] {
      return send ? host.sink() : (host.source(bytes) ? static_cast<int64_t>(bytes) : -1);
    });
    const auto start = std::chrono::steady_clock::now();
    const ShellOutput ran = sh(*vm_, command);
    const std::chrono::duration<double> host_s = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(ran.ok()) << command << ": " << ran.out << vm_->describe();
    EXPECT_EQ(host_side.get(), static_cast<int64_t>(bytes)) << "bytes the host end moved";
    if (!send) {
      EXPECT_EQ(ran.out.substr(0, ran.out.find('\n')), std::to_string(bytes))
          << "bytes the guest received";
    }
    const std::vector<double> v = numbers_of(ran.out);
    if (v.size() != 4) {
      ADD_FAILURE() << "no timing line from '" << command << "': " << ran.out;
      return {};
    }
    return {v[1] - v[0], host_s.count(), static_cast<uint64_t>(v[3] - v[2])};
  }

 private:
  std::string tap_;
  std::string host_ip_;
  std::unique_ptr<Sandbox> vm_;
  bool ready_ = false;
};

// A network interface limited to 256 KiB/s each way sends and receives at that rate
// (within 10%, by the guest's clock and its eth0's counters), while a neighbour VM with an
// unlimited interface, sending at the same time, is not held back. The buckets hold half a
// second of the rate, as the drive's do. (The test bed's emulated network carries about
// 1 MiB/s: the limit is set well under it, so that "not held back" can be told apart.)
TEST(ApiRateLimiter, ALimitedInterfaceHoldsItsBandwidthBothWaysAndAnUnlimitedNeighbourIsNot) {
  ASSERT_TRUE(::access("/dev/net/tun", R_OK | W_OK) == 0 && ::geteuid() == 0)
      << "needs root and /dev/net/tun with the tun module (the test bed has both)";
  constexpr uint64_t kBytesPerSecond = 256 << 10;
  constexpr uint64_t kBucket = kBytesPerSecond / 2;
  constexpr uint64_t kBytes = 2 << 20;
  const nlohmann::json limiter = {{"bandwidth", {{"size", kBucket}, {"refill_time", 500}}}};
  NetVm limited("rlim", 97, {{"rx_rate_limiter", limiter}, {"tx_rate_limiter", limiter}});
  NetVm free("rfree", 96, nlohmann::json::object());
  ASSERT_TRUE(limited.ready() && free.ready());

  auto neighbour = std::async(std::launch::async, [&free] { return free.transfer(true, kBytes); });
  const NetVm::Transfer sent = limited.transfer(true, kBytes);
  const NetVm::Transfer unlimited = neighbour.get();
  const NetVm::Transfer received = limited.transfer(false, kBytes);

  const std::string figures = fmt::format(
      "limited to {} KiB/s: sent {:.0f} KiB/s ({} bytes on the wire in {:.2f} s by the guest's "
      "clock, {:.2f} s by the host's), received {:.0f} KiB/s ({} bytes in {:.2f} s, {:.2f} s); "
      "the unlimited neighbour sent {:.0f} KiB/s ({} bytes in {:.2f} s, {:.2f} s)",
      kBytesPerSecond >> 10, sent.rate(kBucket) / 1024, sent.wire_bytes, sent.guest_s, sent.host_s,
      received.rate(kBucket) / 1024, received.wire_bytes, received.guest_s, received.host_s,
      unlimited.rate(0) / 1024, unlimited.wire_bytes, unlimited.guest_s, unlimited.host_s);
  std::cout << figures << "\n";
  EXPECT_NEAR(sent.rate(kBucket), kBytesPerSecond, kBytesPerSecond * 0.1) << figures;
  EXPECT_NEAR(received.rate(kBucket), kBytesPerSecond, kBytesPerSecond * 0.1) << figures;
  // The limit holds a transfer within 10% of its rate; the test bed's own speed (about 4
  // times the limit) falls under load, as a busy CI machine showed: 1.4 times the limit
  // still tells the two apart.
  constexpr double kUnpaced = 1.4;
  EXPECT_GT(unlimited.rate(0), kUnpaced * kBytesPerSecond)
      << "the unlimited neighbour was held back: " << figures;
  RecordProperty("limited_tx_kib_s", std::to_string(sent.rate(kBucket) / 1024));
  RecordProperty("limited_rx_kib_s", std::to_string(received.rate(kBucket) / 1024));
  RecordProperty("neighbour_tx_kib_s", std::to_string(unlimited.rate(0) / 1024));

  // The limits show in the VM's configuration, and a PATCH lifts them on the running VM.
  const auto client = api_of(limited.vm());
  const auto config = client.get("/vm/config");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->at("network-interfaces")[0].at("tx_rate_limiter").at("bandwidth").at("size"),
            kBucket);
  const nlohmann::json none = {{"bandwidth", {{"size", 0}, {"refill_time", 0}}}};
  ASSERT_TRUE(
      client.send("PATCH", "/network-interfaces/eth0",
                  {{"iface_id", "eth0"}, {"rx_rate_limiter", none}, {"tx_rate_limiter", none}}))
      << limited.vm().describe();
  const NetVm::Transfer lifted = limited.transfer(true, kBytes);
  EXPECT_GT(lifted.rate(0), kUnpaced * kBytesPerSecond)
      << "still limited after the PATCH: " << lifted.rate(0) / 1024 << " KiB/s; " << figures;
}

}  // namespace
}  // namespace dsec::test
