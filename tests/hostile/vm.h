// Runs the hostile guest (guest/guest.c) in dsec-vmm with the devices a sandbox
// gets: a virtio-blk disk on a temporary file, virtio-vsock on a Unix socket with a host
// peer listening for the guest's connections, virtio-rng and, when asked, virtio-net on a
// TAP. Each run is a fresh dsec-vmm process, given one script as its initrd; the run
// passes when dsec-vmm exits 0 after the guest printed its pass line.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/hostile/script.h"
#include "tests/support/build_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/unix_socket.h"

namespace dsec::test::hostile {

inline const std::string kGuestKernel = dsec::test::binary_path("/tests/hostile-guest.elf");
inline const std::string kVmm = dsec::test::binary_path("/vmm/dsec-vmm");

// The disk: 2048 sectors, each filled with the 8-byte word disk_word(sector).
inline constexpr uint64_t kDiskSectors = 2048;
constexpr uint64_t disk_word(uint64_t sector) {
  return 0xd15c'0000'0000'0000ULL | sector;
}

inline constexpr uint64_t kGuestCid = 3;
// A host port the peer listens on (at <uds>_<port>), one nothing listens on, and one
// whose listener never accepts (its connections fill up and stay full).
inline constexpr uint32_t kListeningPort = 5000;
inline constexpr uint32_t kClosedPort = 5001;
inline constexpr uint32_t kSilentPort = 5002;
// A host port whose peer writes kPeerGreetingBytes into every connection.
inline constexpr uint32_t kGreetingPort = 5003;
inline constexpr size_t kPeerGreetingBytes = 256 * 1024;

// A deadline for a whole run, far above what the guest's bounded waits add up to: only a
// VMM that hangs reaches it.
inline constexpr auto kRunDeadline = std::chrono::seconds(120);

// The host end of the guest's vsock connections to one port: accepts on <uds>_<port>,
// writes `greeting` bytes into each connection (as far as the guest's credit lets them
// through) and reads what the guest sends, until the connection ends or the peer stops.
class VsockPeer {
 public:
  VsockPeer(const std::string& path, size_t greeting) : greeting_(greeting) {
    auto listener = io::listen_unix(path);
    EXPECT_TRUE(listener.has_value()) << listener.error().message();
    if (listener) listener_ = std::move(*listener);
    thread_ = std::thread([this] { serve(); });
  }
  VsockPeer(const VsockPeer&) = delete;
  VsockPeer& operator=(const VsockPeer&) = delete;
  ~VsockPeer() {
    stop_ = true;
    thread_.join();
  }

 private:
  void serve() {
    std::vector<UniqueFd> conns;
    std::vector<size_t> written;
    const std::vector<uint8_t> greeting(greeting_, 'h');
    std::vector<uint8_t> sink(64 * 1024);
    while (!stop_) {
      std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
      for (size_t i = 0; i < conns.size(); ++i) {
        fds.push_back({conns[i].get(),
                       static_cast<short>(POLLIN | (written[i] < greeting.size() ? POLLOUT : 0)),
                       0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      const size_t polled = conns.size();  // one accepted below has no entry in fds yet
      if ((fds[0].revents & POLLIN) != 0) {
        UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (conn) {
          conns.push_back(std::move(conn));
          written.push_back(0);
        }
      }
      for (size_t i = 0; i < polled; ++i) {
        const short revents = fds[i + 1].revents;
        if ((revents & POLLOUT) != 0) {
          const ssize_t n = ::send(conns[i].get(), greeting.data() + written[i],
                                   greeting.size() - written[i], MSG_NOSIGNAL | MSG_DONTWAIT);
          if (n > 0) written[i] += static_cast<size_t>(n);
        }
        if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
          const ssize_t n = ::recv(conns[i].get(), sink.data(), sink.size(), MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            written[i] = greeting.size();  // ended: nothing more to write
            conns[i].reset();
          }
        }
      }
      for (size_t i = conns.size(); i-- > 0;) {
        if (!conns[i]) {
          conns.erase(conns.begin() + static_cast<ptrdiff_t>(i));
          written.erase(written.begin() + static_cast<ptrdiff_t>(i));
        }
      }
    }
  }

  const size_t greeting_;
  UniqueFd listener_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct HostileVmOptions {
  // virtio-net on a TAP: needs root and /dev/net/tun (the test bed has both).
  bool net = false;
};

// The machine every run of one test gets; slots in dsec-vmm's order (drives, vsock, net,
// rng).
class HostileVm {
 public:
  explicit HostileVm(HostileVmOptions options = {}) : options_(options) {
    std::ofstream disk(disk_path(), std::ios::binary);
    for (uint64_t sector = 0; sector < kDiskSectors; ++sector) {
      const uint64_t word = disk_word(sector);
      for (int i = 0; i < 64; ++i) disk.write(reinterpret_cast<const char*>(&word), sizeof(word));
    }
    const int pid = static_cast<int>(::getpid());
    tap_ = "dsechost" + std::to_string(pid % 1000);
    subnet_ = 30 + pid % 200;
  }

  bool has_net() const { return options_.net; }
  uint32_t block_slot() const { return 0; }
  uint32_t vsock_slot() const { return 1; }
  uint32_t net_slot() const { return 2; }
  uint32_t rng_slot() const { return options_.net ? 3 : 2; }
  // The TAP's IPv4 addresses: the host's 10.98.S.1/24 and the guest's 10.98.S.2.
  uint32_t host_ip() const { return 0x0a620001 | uint32_t(subnet_) << 8; }
  uint32_t guest_ip() const { return host_ip() + 1; }
  std::string disk_path() const { return dir_.file("disk.img"); }

  // Boots the hostile guest with `script` as its initrd and waits for dsec-vmm to end.
  ProcessOutput run(const Script& script) {
    const std::string script_path = dir_.file("script.bin");
    const std::vector<uint8_t> bytes = script.bytes();
    std::ofstream(script_path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    const std::string uds = dir_.file("vsock.sock");
    const auto port_path = [&uds](uint32_t port) { return uds + "_" + std::to_string(port); };
    VsockPeer quiet(port_path(kListeningPort), 0);
    VsockPeer greeting(port_path(kGreetingPort), kPeerGreetingBytes);
    auto silent = io::listen_unix(port_path(kSilentPort));
    EXPECT_TRUE(silent.has_value()) << silent.error().message();
    std::vector<std::string> args{
        kVmm,       "run",       "--kernel", kGuestKernel,
        "--initrd", script_path, "--memory", std::to_string(kRamBytes >> 20),
        "--drive",  disk_path(), "--vsock",  uds,
        "--rng"};
    if (options_.net) {
      const std::string host = "10.98." + std::to_string(subnet_) + ".1/24";
      args.insert(args.end(), {"--net", "tap=" + tap_ + ",host=" + host});
    }
    ProcessOutput out = run_process(args, kRunDeadline, SIGUSR1);
    for (uint32_t port : {kListeningPort, kSilentPort, kGreetingPort}) {
      ::unlink(port_path(port).c_str());
    }
    return out;
  }

 private:
  // Unix sockets cannot live on 9p (the test bed's /tmp): /run is a local tmpfs there.
  static std::string local_dir() {
    return ::access("/run", W_OK) == 0 ? "/run/" : ::testing::TempDir();
  }

  HostileVmOptions options_;
  TempDir dir_{local_dir()};
  std::string tap_;
  int subnet_ = 0;
};

// The verdict of one run: dsec-vmm exited 0 and the guest printed its pass line.
inline ::testing::AssertionResult passed(const ProcessOutput& out) {
  if (out.exit_status == 0 && out.out.find(HOSTILE_PASS_LINE) != std::string::npos) {
    return ::testing::AssertionSuccess() << "took " << out.elapsed.count() << " ms";
  }
  return ::testing::AssertionFailure() << out.describe();
}

}  // namespace dsec::test::hostile
