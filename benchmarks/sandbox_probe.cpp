// sandbox_probe: measures a running sandbox through its guest agent, the same way whichever
// VMM runs it (benchmarks/sandbox-vs-qemu drives it against dsec-vmm and QEMU microvm):
//   - exec round trip of `true` (connect, exec, exit status back);
//   - vsock throughput: a command's stdout streamed to the host (`head -c` of zeros, or with
//     --stream-lines N the N short lines of `seq 1 N`, written line by line);
//   - virtio-blk: sequential 1 MiB reads and writes and 4 KiB random reads (QD1, O_DIRECT),
//     by the guest's dsec-blkbench, timed from the host less one exec round trip.
// Prints one JSON object. Reaches the agent through a Firecracker-style vsock Unix socket
// (--uds) or straight over AF_VSOCK (--cid, for vhost-vsock).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "vmm/agent/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using dsec::agent::AgentClient;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Run {
  double ms = 0;
  uint64_t out_bytes = 0;
  std::string out;
  bool ok = false;
  std::string error;
};

Run run(AgentClient& client, std::vector<std::string> argv, bool keep_output) {
  Run r;
  const auto t0 = Clock::now();
  auto status = client.exec(
      {std::move(argv), {}, "", 0, false},
      [&](std::span<const uint8_t> b) {
        r.out_bytes += b.size();
        if (keep_output) {
          r.out.append(b.begin(), b.end());
        }
        return dsec::ok();
      },
      [&](std::span<const uint8_t> b) {
        r.error.append(b.begin(), b.end());
        return dsec::ok();
      });
  r.ms = ms_since(t0);
  if (!status) {
    r.error = status.error().message();
  } else if (status->kind != dsec::agent::ExitStatus::Kind::kExited || status->code != 0) {
    r.error += " (exit " + std::to_string(status->code) + ")";
  } else {
    r.ok = true;
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void die(const std::string& why) {
  (void)std::fprintf(stderr, "sandbox_probe: %s\n", why.c_str());
  std::exit(1);
}

// After a failed step: the end of the guest kernel's log, if the agent still answers (a
// fault that killed the agent's process, say, shows there; a guest that died cannot say).
std::string guest_log_tail(AgentClient& client) {
  Run r = run(client, {"dmesg"}, true);
  if (!r.ok) {
    return "\n(the guest's dmesg could not be read: " + r.error + ")";
  }
  const size_t keep = 3000;
  return "\nthe guest's dmesg, last lines:\n" +
         (r.out.size() > keep ? r.out.substr(r.out.size() - keep) : r.out);
}

}  // namespace

int main(int argc, char** argv) {
  std::string uds, disk = "/dev/vda";
  uint32_t cid = 0;
  int execs = 30, stream_mib = 32, disk_mib = 32, rand_ops = 2000, wait_s = 300;
  long stream_lines = 0;
  // The moment the VMM was started (CLOCK_MONOTONIC, steady_clock's), so that "ready"
  // counts the VMM's own start-up; 0: from the probe's start.
  long long since_ns = 0;
  bool ready_only = false;  // --ready-only 1: the first figure alone (restore-vs-qemu)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--uds") {
      uds = v;
    } else if (k == "--cid") {
      cid = static_cast<uint32_t>(std::stoul(v));
    } else if (k == "--execs") {
      execs = std::stoi(v);
    } else if (k == "--stream-mib") {
      stream_mib = std::stoi(v);
    } else if (k == "--stream-lines") {
      stream_lines = std::stol(v);
    } else if (k == "--disk") {
      disk = v;
    } else if (k == "--disk-mib") {
      disk_mib = std::stoi(v);
    } else if (k == "--rand-ops") {
      rand_ops = std::stoi(v);
    } else if (k == "--wait") {
      wait_s = std::stoi(v);
    } else if (k == "--ready-only") {
      ready_only = v == "1";
    } else if (k == "--since-monotonic-ns") {
      since_ns = std::stoll(v);
    } else {
      die("unknown option " + k);
    }
  }
  if (uds.empty() == (cid == 0)) {
    die("give exactly one of --uds PATH and --cid N");
  }
  AgentClient client([&]() -> dsec::Result<dsec::UniqueFd> {
    return uds.empty() ? dsec::agent::connect_vsock(cid, dsec::agent::kAgentPort)
                       : dsec::agent::connect_vsock_uds(uds, dsec::agent::kAgentPort);
  });

  // Ready: the first health check answered. Tried every 10 ms, so the figure is that
  // close to the moment the agent started to listen (100 ms steps hid half of a
  // difference between the VMMs).
  const auto t0 =
      since_ns > 0 ? Clock::time_point(std::chrono::nanoseconds(since_ns)) : Clock::now();
  std::string last;
  while (true) {
    auto h = client.health();
    if (h) {
      break;
    }
    last = h.error().message();
    if (ms_since(t0) > wait_s * 1000.0) {
      die("the agent did not answer: " + last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double ready_ms = ms_since(t0);
  if (ready_only) {
    std::printf("{\"ready_ms\": %.1f}\n", ready_ms);
    return 0;
  }

  std::vector<double> rtt;
  for (int i = 0; i < execs; ++i) {
    Run r = run(client, {"true"}, false);
    if (!r.ok) {
      die("exec true: " + r.error);
    }
    rtt.push_back(r.ms);
  }
  const double rtt_ms = median(rtt);
  std::vector<double> sorted = rtt;
  std::sort(sorted.begin(), sorted.end());
  const double rtt_p90 = sorted[sorted.size() * 9 / 10];

  uint64_t stream_bytes = static_cast<uint64_t>(stream_mib) << 20;
  std::vector<std::string> stream_argv{"head", "-c", std::to_string(stream_bytes), "/dev/zero"};
  if (stream_lines > 0) {
    stream_bytes = 0;
    for (long i = 1; i <= stream_lines; ++i) {
      stream_bytes += std::to_string(i).size() + 1;
    }
    stream_argv = {"seq", "1", std::to_string(stream_lines)};
  }
  Run stream = run(client, stream_argv, false);
  if (!stream.ok || stream.out_bytes != stream_bytes) {
    die("stream: " + stream.error + " after " + std::to_string(stream.out_bytes) + " of " +
        std::to_string(stream_bytes) + " bytes" + guest_log_tail(client));
  }
  const double stream_mib_s = (stream_bytes / 1048576.0) / ((stream.ms - rtt_ms) / 1000.0);

  const auto blk = [&](const char* mode, int n) {
    Run r = run(client, {"dsec-blkbench", mode, disk, std::to_string(n)}, true);
    if (!r.ok) {
      die(std::string("dsec-blkbench ") + mode + ": " + r.error + guest_log_tail(client));
    }
    return (r.ms - rtt_ms) / 1000.0;
  };
  const double write_s = blk("seqwrite", disk_mib);
  const double read_s = blk("seqread", disk_mib);
  const double rand_s = blk("randread", rand_ops);

  std::printf(
      "{\"ready_ms\": %.1f, \"exec_true_ms\": %.2f, \"exec_true_p90_ms\": %.2f, "
      "\"vsock_stream_mib_s\": %.1f, \"blk_seqwrite_mib_s\": %.1f, \"blk_seqread_mib_s\": %.1f, "
      "\"blk_randread_4k_iops\": %.0f}\n",
      ready_ms, rtt_ms, rtt_p90, stream_mib_s, disk_mib / write_s, disk_mib / read_s,
      rand_ops / rand_s);
  return 0;
}
