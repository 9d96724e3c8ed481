// `dsec-vmm pool` in front of a tenant that tries to take its connections, end to end in the
// test bed (docs/security.md, "tenant -> the pool's availability"): an attacker holding 300
// idle connections (they send nothing) and 50 slow ones (a header byte a second), each
// opened again a second or two after the daemon closes it, does not hold up another tenant's
// acquire: its p99 stays within 1.5x of a quiet run's (plus the test bed's noise, below),
// and its release is measured too. The attacker's connections past its cap (64) are closed
// at once, and the others at their deadlines.
//
// The victim's latency is measured in blocks of rounds, quiet and attacked by turns, so
// that the shared host's load falls on both alike. Each round starts with the pool at rest
// (its one ready clone ready, nothing starting or stopping), and the image's max is that one
// clone, so that no restore runs during a round, nor is launched before the acquire's
// answer (a refill's launch, some 35 ms in the test bed, would be most of what a round
// measures): a round measures the daemon's answers. Once with the attacker another uid on
// the socket, once another address (and token) on TCP.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/eventually.h"
#include "tests/support/file_text.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/temp_dir.h"
#include "tests/support/warm_image.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/unix_socket.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using json = nlohmann::json;

// The attack, as issue 38 puts it.
constexpr int kIdleClients = 300;
constexpr int kSlowClients = 50;
// The daemon's cap on one caller's connections (kMaxClientsPerCaller, pool_command.cpp).
constexpr int kCallerCap = 64;
// The daemon's deadlines here (--client-header-timeout, --client-idle-timeout): short, so
// that each attacked block sees its first connections closed.
constexpr auto kHeaderTimeout = 5s;
constexpr auto kIdleTimeout = 8s;
// A connection closed within this of its connect was refused (the daemon's loop gets to a
// refusal late when the test bed's host is loaded: 2 s seen); one closed at its deadline is
// closed within this slack after it (the emulated test bed's timers and scheduling).
constexpr auto kAtOnce = 3s;
constexpr auto kSlack = 3s;
// Blocks of each kind, quiet and attacked by turns, and the victim's rounds in each.
constexpr int kBlocks = 3;
constexpr int kRoundsPerBlock = 10;
constexpr double kMaxP99Ratio = 1.5;
// With 30 rounds a p99 is the slowest round, and in the test bed one round alone can lose
// tens of ms to the host (a quiet p99 of 17-110 ms, attacked minus quiet -21 to +20 ms over
// eight runs with the attack changing nothing at p50): the check allows this much on top of
// the ratio. A daemon held up by the attack costs a round seconds (a deadline), or fails it.
constexpr auto kP99Noise = 50ms;
constexpr uid_t kVictimUid = 4000;
constexpr uid_t kAttackerUid = 4001;
constexpr const char* kVictimToken = "victim-token-0123456789abcdef";
constexpr const char* kAttackerToken = "attacker-token-0123456789abcdef";

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Where a client connects, and as whom: the socket (its uid is the child's), or the TCP
// port from a source address of the loopback (127.0.0.0/8 is all the host's) with a token.
struct Endpoint {
  std::string socket;  // empty: TCP
  uint16_t port = 0;
  std::string source = "127.0.0.1";
  std::string token;
};

// A blocking socket connected to the daemon; empty when connect failed (errno says why).
UniqueFd connect_to(const Endpoint& to) {
  if (!to.socket.empty()) {
    auto fd = io::connect_unix(to.socket);
    if (!fd) {
      return UniqueFd();
    }
    ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) & ~O_NONBLOCK);
    return std::move(*fd);
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  sockaddr_in daemon{};
  daemon.sin_family = AF_INET;
  daemon.sin_port = htons(to.port);
  daemon.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd || ::inet_pton(AF_INET, to.source.c_str(), &from.sin_addr) != 1 ||
      ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&daemon), sizeof daemon) != 0) {
    return UniqueFd();
  }
  return fd;
}

struct Reply {
  int status = 0;
  std::string body;
  std::string raw;  // or why there is none
};

// One request on a connection of its own (which it asks to close), and its whole answer.
Reply exchange(const Endpoint& to, const std::string& method, const std::string& path,
               const std::string& body = "") {
  const UniqueFd fd = connect_to(to);
  if (!fd) {
    return {.status = 0, .body = {}, .raw = std::string("connect: ") + std::strerror(errno)};
  }
  const timeval limit{.tv_sec = 60, .tv_usec = 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  const std::string request =
      method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
      (to.token.empty() ? "" : "Authorization: Bearer " + to.token + "\r\n") +
      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return {.status = 0, .body = {}, .raw = std::string("send: ") + std::strerror(errno)};
  }
  Reply reply;
  std::array<char, 4096> buffer{};
  ssize_t n = 0;
  while ((n = ::recv(fd.get(), buffer.data(), buffer.size(), 0)) > 0) {
    reply.raw.append(buffer.data(), static_cast<size_t>(n));
  }
  if (n < 0 || reply.raw.empty()) {
    reply.raw += std::string(" (recv: ") + (n < 0 ? std::strerror(errno) : "closed") + ")";
  }
  if (reply.raw.starts_with("HTTP/1.1 ") && reply.raw.size() >= 12) {
    reply.status = std::atoi(reply.raw.substr(9, 3).c_str());
  }
  if (const size_t end = reply.raw.find("\r\n\r\n"); end != std::string::npos) {
    reply.body = reply.raw.substr(end + 4);
  }
  return reply;
}

void write_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
}

// A child process that does one side's work (the victim's rounds, the attacker's
// connections) as `uid` when given: its lines come back through `out` as it goes, and it
// stops when `control` is closed, if it watches it.
class Child {
 public:
  using Work = std::function<void(int out, int control)>;
  Child(std::optional<uid_t> uid, const Work& work) {
    std::array<int, 2> out{};
    std::array<int, 2> control{};
    if (::pipe2(out.data(), O_CLOEXEC) != 0 || ::pipe2(control.data(), O_CLOEXEC) != 0) {
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      // Its own pipes only: a copy of another child's control pipe would keep that one going.
      for (int fd = 3; fd < 1024; ++fd) {
        if (fd != out[1] && fd != control[0]) {
          ::close(fd);
        }
      }
      if (uid && (::setgroups(0, nullptr) != 0 || ::setresgid(*uid, *uid, *uid) != 0 ||
                  ::setresuid(*uid, *uid, *uid) != 0)) {
        write_line(out[1], "error cannot become uid " + std::to_string(*uid));
        ::_exit(1);
      }
      work(out[1], control[0]);
      ::_exit(0);
    }
    ::close(out[1]);
    ::close(control[0]);
    out_ = UniqueFd(out[0]);
    control_ = UniqueFd(control[1]);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { finish(); }

  // The next line it wrote; nullopt at its end, or when none came within `within`.
  std::optional<std::string> line(std::chrono::seconds within) {
    const auto deadline = Clock::now() + within;
    while (true) {
      if (const size_t end = buffer_.find('\n'); end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      pollfd p{.fd = out_.get(), .events = POLLIN, .revents = 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        return std::nullopt;
      }
      std::array<char, 4096> chunk{};
      const ssize_t n = ::read(out_.get(), chunk.data(), chunk.size());
      if (n <= 0) {
        return std::nullopt;
      }
      buffer_.append(chunk.data(), static_cast<size_t>(n));
    }
  }
  // Tells it to stop (closes its control pipe); the lines it writes until its end.
  std::vector<std::string> stop(std::chrono::seconds within = 60s) {
    control_.reset();
    std::vector<std::string> lines;
    while (auto next = line(within)) {
      lines.push_back(*next);
    }
    finish();
    return lines;
  }

 private:
  void finish() {
    if (pid_ > 0) {
      control_.reset();
      ::kill(pid_, SIGKILL);  // stopped already, unless it hung
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  pid_t pid_ = -1;
  UniqueFd out_;
  UniqueFd control_;
  std::string buffer_;
};

// The victim's rounds: each waits for the pool at rest, then acquires a sandbox and releases
// it, and writes "round ACQUIRE_MS RELEASE_MS" (or "error WHAT").
void victim_rounds(const Endpoint& to, int rounds, int out) {
  const auto at_rest = [&] {
    const auto reply = exchange(to, "GET", "/images");
    const auto images = json::parse(reply.body, nullptr, false);
    if (reply.status != 200 || !images.is_object() || !images.contains("images") ||
        images["images"].empty()) {
      return false;
    }
    const auto& counts = images["images"][0]["sandboxes"];
    return counts["ready"] == 1 && counts["starting"] == 0 && counts["in_use"] == 0 &&
           counts["stopping"] == 0;
  };
  for (int round = 0; round < rounds; ++round) {
    if (!eventually(at_rest, 120s)) {
      write_line(out, "error the pool was not at rest within 120 s");
      return;
    }
    const auto start = Clock::now();
    const Reply acquired = exchange(to, "POST", "/sandboxes", R"({"image": "base"})");
    const auto acquired_at = Clock::now();
    const auto sandbox = json::parse(acquired.body, nullptr, false);
    if (acquired.status != 201 || !sandbox.contains("id")) {
      write_line(out, "error acquire: " + acquired.raw);
      return;
    }
    const Reply released = exchange(to, "DELETE", "/sandboxes/" + sandbox["id"].get<std::string>());
    const auto released_at = Clock::now();
    if (released.status != 204) {
      write_line(out, "error release: " + released.raw);
      return;
    }
    write_line(out, "round " + std::to_string(ms(acquired_at - start)) + " " +
                        std::to_string(ms(released_at - acquired_at)));
  }
}

// The attacker: kIdleClients connections that send nothing and kSlowClients that send a
// request's first bytes one a second (every seventh it opens is a slow one, so that both
// kinds are among those its cap lets in). Each connection the daemon closes is opened
// again a second or two later. Writes "ready" once its first connections are in (all of them
// connected, and all but the cap's closed, or 10 s passed), then a line per connection
// that ended: "closed KIND WAVE LIFETIME_MS HOW", KIND slow or idle, WAVE 1 for the first
// ones, HOW server (the daemon closed it), answered (it sent bytes), held (open when the
// attacker stopped) or unconnected (connect failed); until `control` closes.
void attack(const Endpoint& to, int out, int control) {
  struct Slot {
    bool slow = false;
    bool first = true;
    UniqueFd fd;
    Clock::time_point opened{};
    Clock::time_point due{};  // its next byte, or its next connect
    size_t sent = 0;
  };
  const std::string request =
      "POST /sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
      std::string(kAttackerToken) + "\r\nX-Slow: " + std::string(1000, 's');
  std::vector<Slot> slots(kIdleClients + kSlowClients);
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].slow = i % 7 == 0 && i / 7 < static_cast<size_t>(kSlowClients);
  }
  const auto start = Clock::now();
  int first_closed = 0;
  bool ready = false;
  // Each connection is opened again a second or two after its end, spread over 1-3 s:
  // those refused together would otherwise come back together, hundreds of connections in
  // a burst, and each refusal costs the daemon its accept and close (about 0.7 ms of
  // emulated CPU in the test bed, more on TCP): that is a connection flood, another attack.
  std::minstd_rand random(38);
  std::uniform_int_distribution<int> again_after(1000, 3000);
  // Kept until the end: the test reads them only then, and a full pipe would stall the
  // attack and its clock.
  std::vector<std::string> records;
  const auto ended = [&](Slot& slot, const char* how) {
    const auto now = Clock::now();
    records.push_back(std::string("closed ") + (slot.slow ? "slow " : "idle ") +
                      (slot.first ? "1 " : "0 ") + std::to_string(ms(now - slot.opened)) + " " +
                      how);
    first_closed += slot.first ? 1 : 0;
    slot.fd.reset();
    slot.first = false;
    slot.due = now + milliseconds(again_after(random));
  };
  const auto send_byte = [&](Slot& slot) {
    if (::send(slot.fd.get(), &request[slot.sent], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
      ++slot.sent;
    }
    slot.due = Clock::now() + 1s;
  };
  const auto open = [&](Slot& slot) {
    slot.opened = Clock::now();
    slot.fd = connect_to(to);
    if (!slot.fd) {
      ended(slot, "unconnected");
      return;
    }
    slot.sent = 0;
    if (slot.slow) {
      send_byte(slot);
    }
  };
  for (auto& slot : slots) {
    open(slot);
  }
  while (true) {
    const auto now = Clock::now();
    if (!ready &&
        (first_closed >= static_cast<int>(slots.size()) - kCallerCap || now - start > 10s)) {
      write_line(out, "ready");
      ready = true;
    }
    std::vector<pollfd> polled = {pollfd{.fd = control, .events = POLLIN, .revents = 0}};
    std::vector<Slot*> polled_slots{nullptr};
    // At most twenty rounds a second, however the connections' times fall: the attacker's
    // own CPU time is the test bed's, and not the daemon's doing.
    auto next = now + 100ms;
    for (auto& slot : slots) {
      const bool dribbling = slot.fd && slot.slow && slot.sent < request.size();
      if (!slot.fd && slot.due <= now) {
        open(slot);
      } else if (dribbling && slot.due <= now) {
        send_byte(slot);
      }
      if (slot.fd) {
        polled.push_back({.fd = slot.fd.get(), .events = POLLIN | POLLRDHUP, .revents = 0});
        polled_slots.push_back(&slot);
      }
      if ((!slot.fd || dribbling) && slot.due < next) {
        next = slot.due;
      }
    }
    next = std::max(next, now + 50ms);
    const auto wait = std::chrono::duration_cast<milliseconds>(next - Clock::now());
    if (::poll(polled.data(), polled.size(), static_cast<int>(std::max<int64_t>(wait.count(), 0))) <
        0) {
      continue;
    }
    if (polled[0].revents != 0) {
      break;  // the test closed its end: stop
    }
    for (size_t i = 1; i < polled.size(); ++i) {
      if (polled[i].revents == 0) {
        continue;
      }
      std::array<char, 512> buffer{};
      const ssize_t n = ::recv(polled[i].fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        continue;
      }
      ended(*polled_slots[i], n > 0 ? "answered" : "server");
    }
  }
  for (auto& slot : slots) {
    if (slot.fd) {
      ended(slot, "held");
    }
  }
  for (const auto& record : records) {
    write_line(out, record);
  }
}

// p50 and p99 (nearest rank) of `samples`.
struct Percentiles {
  double p50 = 0;
  double p99 = 0;
};
Percentiles percentiles(std::vector<double> samples) {
  if (samples.empty()) {
    return {};
  }
  std::sort(samples.begin(), samples.end());
  const auto rank = [&](double p) {
    const auto index = static_cast<size_t>(std::ceil(p * static_cast<double>(samples.size())));
    return samples[std::clamp<size_t>(index, 1, samples.size()) - 1];
  };
  return {.p50 = rank(0.50), .p99 = rank(0.99)};
}

// What one attacked block's connections came to.
struct AttackTally {
  int first_refused = 0;   // of its first connections, closed at once
  int first_accepted = 0;  // and the others
  int refused = 0;         // every connection closed at once
  int slow_at_deadline = 0;
  int idle_at_deadline = 0;
  double slow_min_ms = 1e9;
  double slow_max_ms = 0;
  double idle_min_ms = 1e9;
  double idle_max_ms = 0;
  std::vector<std::string> wrong;  // lines that break the rules, and why
};

// Checks each "closed" line of an attacker against the rules: closed by the daemon at once
// (refused) or at its kind's deadline, never answered, never held past its deadline.
void tally(const std::vector<std::string>& lines, AttackTally& t) {
  for (const auto& line : lines) {
    std::istringstream words(line);
    std::string word;
    std::string kind;
    std::string how;
    int first = 0;
    double lived = 0;
    if (!(words >> word >> kind >> first >> lived >> how) || word != "closed") {
      t.wrong.push_back(line + ": not an attacker's line");
      continue;
    }
    const bool slow = kind == "slow";
    const double deadline = ms(slow ? kHeaderTimeout : kIdleTimeout);
    const bool at_once = lived < ms(kAtOnce);
    if (how == "held") {
      if (lived > deadline + ms(kSlack)) {
        t.wrong.push_back(line + ": still open past its deadline");
      }
      continue;
    }
    if (how != "server") {
      t.wrong.push_back(line + ": the daemon should have closed it, silently");
      continue;
    }
    if (first == 1) {
      (at_once ? t.first_refused : t.first_accepted) += 1;
    }
    if (at_once) {
      ++t.refused;
    } else if (lived >= deadline - 100 && lived <= deadline + ms(kSlack)) {
      (slow ? t.slow_at_deadline : t.idle_at_deadline) += 1;
      auto& low = slow ? t.slow_min_ms : t.idle_min_ms;
      auto& high = slow ? t.slow_max_ms : t.idle_max_ms;
      low = std::min(low, lived);
      high = std::max(high, lived);
    } else {
      t.wrong.push_back(line + ": closed neither at once nor at its deadline");
    }
  }
}

// CPU time so far, in clock ticks: the daemon's (its threads'), and the machine's, busy and
// all, so that a block can say how much of the test bed the attack took, and how much of it
// was the daemon's.
struct CpuTicks {
  long long daemon = 0;
  long long busy = 0;
  long long all = 0;
};
CpuTicks cpu_ticks(pid_t daemon) {
  CpuTicks ticks;
  const std::string stat = file_text("/proc/" + std::to_string(daemon) + "/stat");
  // utime and stime: fields 14 and 15, counted from the pid; the name before ")" may hold
  // spaces.
  std::istringstream fields(stat.substr(std::min(stat.rfind(')') + 2, stat.size())));
  std::string field;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    ticks.daemon += i >= 14 ? std::atoll(field.c_str()) : 0;
  }
  std::istringstream cpu(file_text("/proc/stat"));
  std::string name;
  cpu >> name;
  long long value = 0;
  for (int i = 0; i < 8 && cpu >> value; ++i) {
    ticks.all += value;
    ticks.busy += i == 3 || i == 4 ? 0 : value;  // idle and iowait are not busy
  }
  return ticks;
}

class PoolExhaustion : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
    ASSERT_TRUE(image.failure.empty()) << image.failure;
    // Other uids reach the socket through its directory; SO_PEERCRED is the check.
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
    const std::string tokens = dir_.file("tokens");
    std::ofstream(tokens) << "victim " << kVictimToken << "\nattacker " << kAttackerToken << "\n";
    ASSERT_EQ(::chmod(tokens.c_str(), 0600), 0);
    daemon_.emplace(dir_.path(),
                    std::vector<std::string>{
                        "--ready-timeout", "280", "--health-interval", "0", "--allow-uid",
                        std::to_string(kVictimUid), "--allow-uid", std::to_string(kAttackerUid),
                        "--tcp-port", "0", "--tokens", tokens, "--client-header-timeout",
                        std::to_string(kHeaderTimeout.count()), "--client-idle-timeout",
                        std::to_string(kIdleTimeout.count())});
    ASSERT_TRUE(daemon_->serving(60s)) << daemon_->log();
    const std::string said = "serving on 127.0.0.1:";
    const std::string log = daemon_->log();
    const size_t at = log.find(said);
    ASSERT_NE(at, std::string::npos) << log;
    port_ = static_cast<uint16_t>(std::atoi(log.c_str() + at + said.size()));
    ASSERT_NE(port_, 0) << log;
    ASSERT_FALSE(link_into_store(image, daemon_->image_dir(), "base").empty());
    const Endpoint as_operator{.socket = daemon_->socket(), .port = 0, .source = {}, .token = {}};
    const auto registered =
        exchange(as_operator, "PUT", "/images/base", R"({"ready": 1, "max": 1})");
    ASSERT_EQ(registered.status, 200) << registered.raw;
  }

  struct Round {
    double acquire = 0;  // ms
    double release = 0;
  };
  // `count` of the victim's rounds, in a child process of its own, as `uid` when given;
  // empty (and the test failed) when one failed.
  std::vector<Round> victim_rounds_in_child(const Endpoint& victim, std::optional<uid_t> uid,
                                            int count) {
    Child child(uid, [&](int out, int) { victim_rounds(victim, count, out); });
    std::vector<Round> rounds;
    for (int i = 0; i < count; ++i) {
      const auto line = child.line(300s);
      if (!line || !line->starts_with("round ")) {
        ADD_FAILURE() << (line ? *line : "the victim said nothing for 300 s") << "\n"
                      << daemon_->log();
        return {};
      }
      std::istringstream words(line->substr(6));
      Round round;
      words >> round.acquire >> round.release;
      rounds.push_back(round);
    }
    return rounds;
  }

  // Quiet and attacked blocks by turns; then checks and prints what they measured.
  void measure(const Endpoint& victim, std::optional<uid_t> victim_uid, const Endpoint& attacker,
               std::optional<uid_t> attacker_uid) {
    // Quiet [0] and attacked [1]: each round's acquire, its release, and the two together.
    std::array<std::vector<double>, 2> acquires;
    std::array<std::vector<double>, 2> releases;
    std::array<std::vector<double>, 2> both;
    std::array<CpuTicks, 2> spent{};
    AttackTally t;
    // Unmeasured: the first rounds pay for what the daemon and the clones set up once.
    if (victim_rounds_in_child(victim, victim_uid, 2).empty()) {
      return;
    }
    for (int block = 0; block < 2 * kBlocks; ++block) {
      const bool attacking = block % 2 == 1;
      const size_t kind = attacking ? 1 : 0;
      const CpuTicks before = cpu_ticks(daemon_->pid());
      std::optional<Child> attacker_child;
      Clock::time_point attack_ready{};
      if (attacking) {
        attacker_child.emplace(attacker_uid,
                               [&](int out, int control) { attack(attacker, out, control); });
        const auto ready = attacker_child->line(60s);
        ASSERT_EQ(ready, "ready") << "the attacker's connections did not settle";
        attack_ready = Clock::now();
      }
      const auto rounds = victim_rounds_in_child(victim, victim_uid, kRoundsPerBlock);
      if (rounds.empty()) {
        return;
      }
      for (const auto& round : rounds) {
        acquires[kind].push_back(round.acquire);
        releases[kind].push_back(round.release);
        both[kind].push_back(round.acquire + round.release);
      }
      if (attacking) {
        // Long enough for the first connections' deadlines to pass, so every block checks
        // them.
        const auto hold = attack_ready + kIdleTimeout + kSlack + 500ms;
        if (Clock::now() < hold) {
          std::this_thread::sleep_until(hold);
        }
        tally(attacker_child->stop(), t);
      }
      const CpuTicks after = cpu_ticks(daemon_->pid());
      spent[kind].daemon += after.daemon - before.daemon;
      spent[kind].busy += after.busy - before.busy;
      spent[kind].all += after.all - before.all;
    }
    const auto share = [](long long part, long long all) {
      return all > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(all) : 0.0;
    };
    const auto figures = [&](const char* what, const std::array<std::vector<double>, 2>& ms) {
      const auto q = percentiles(ms[0]);
      const auto a = percentiles(ms[1]);
      std::printf(
          "victim's %s, ms (n=%zu each): quiet p50 %.1f p99 %.1f; attacked p50 %.1f p99 "
          "%.1f; p99 ratio %.2f\n",
          what, ms[0].size(), q.p50, q.p99, a.p50, a.p99, a.p99 / q.p99);
      RecordProperty(std::string(what) + " quiet p50, p99 (ms)",
                     std::to_string(q.p50) + ", " + std::to_string(q.p99));
      RecordProperty(std::string(what) + " attacked p50, p99 (ms)",
                     std::to_string(a.p50) + ", " + std::to_string(a.p99));
      return std::pair(q, a);
    };
    const auto [quiet, attacked] = figures("acquire", acquires);
    figures("release", releases);
    figures("acquire+release", both);
    std::printf(
        "attacker (%d blocks): first connections %d refused at once, %d let in; %d refused in "
        "all; slow closed at the header deadline (%lld ms): %d, after %.0f-%.0f ms; idle at the "
        "idle deadline (%lld ms): %d, after %.0f-%.0f ms\n"
        "CPU, quiet and attacked: the daemon %.1f%% and %.1f%% of the machine's, the machine "
        "busy %.1f%% and %.1f%%\n",
        kBlocks, t.first_refused, t.first_accepted, t.refused,
        static_cast<long long>(milliseconds(kHeaderTimeout).count()), t.slow_at_deadline,
        t.slow_at_deadline > 0 ? t.slow_min_ms : 0.0, t.slow_max_ms,
        static_cast<long long>(milliseconds(kIdleTimeout).count()), t.idle_at_deadline,
        t.idle_at_deadline > 0 ? t.idle_min_ms : 0.0, t.idle_max_ms,
        share(spent[0].daemon, spent[0].all), share(spent[1].daemon, spent[1].all),
        share(spent[0].busy, spent[0].all), share(spent[1].busy, spent[1].all));

    // The acquire, as issue 38 asks. The release is printed, not checked: one slow release
    // under attack (up to 500 ms on a loaded host) has been seen (docs/security.md).
    const double allowed = std::max(kMaxP99Ratio * quiet.p99, quiet.p99 + ms(kP99Noise));
    std::printf("acquire's attacked p99 allowed: %.1f ms\n", allowed);
    EXPECT_LE(attacked.p99, allowed) << "the attack held up the victim's acquire";
    // The cap let in exactly its share of each block's first connections, and refused the
    // rest at once.
    EXPECT_EQ(t.first_accepted, kBlocks * kCallerCap);
    EXPECT_EQ(t.first_refused, kBlocks * (kIdleClients + kSlowClients - kCallerCap));
    EXPECT_GE(t.slow_at_deadline, kBlocks) << "no slow connection was closed at its deadline";
    EXPECT_GE(t.idle_at_deadline, kBlocks) << "no idle connection was closed at its deadline";
    for (const auto& wrong : t.wrong) {
      ADD_FAILURE() << wrong;
    }
    EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->log();
  }

  TempDir dir_{::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path()};
  std::optional<PoolDaemon> daemon_;
  uint16_t port_ = 0;
};

TEST_F(PoolExhaustion, IdleAndSlowConnectionsOfAnotherUidDoNotHoldUpATenantsAcquire) {
  const Endpoint socket{.socket = daemon_->socket(), .port = 0, .source = {}, .token = {}};
  measure(socket, kVictimUid, socket, kAttackerUid);
}

TEST_F(PoolExhaustion, IdleAndSlowConnectionsFromAnotherAddressDoNotHoldUpATenantsAcquire) {
  measure(Endpoint{.socket = {}, .port = port_, .source = "127.0.0.1", .token = kVictimToken},
          std::nullopt,
          Endpoint{.socket = {}, .port = port_, .source = "127.0.0.2", .token = kAttackerToken},
          std::nullopt);
}

}  // namespace
}  // namespace dsec::test
