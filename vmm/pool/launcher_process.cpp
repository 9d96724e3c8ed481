#include "vmm/pool/launcher_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace dsec::pool {
namespace {

// A request or an answer: its fields back to back, each a 4-byte length then its bytes.
constexpr size_t kMaxMessageBytes = size_t{64} << 10;
constexpr size_t kMaxFds = 8;

void put(std::string& message, std::string_view field) {
  const auto size = static_cast<uint32_t>(field.size());
  message.append(reinterpret_cast<const char*>(&size), sizeof size);
  message.append(field);
}

std::vector<std::string> fields_of(std::string_view message) {
  std::vector<std::string> fields;
  while (message.size() >= sizeof(uint32_t)) {
    uint32_t size = 0;
    std::memcpy(&size, message.data(), sizeof size);
    message.remove_prefix(sizeof size);
    if (size > message.size()) {
      return {};  // malformed: no field at all
    }
    fields.emplace_back(message.substr(0, size));
    message.remove_prefix(size);
  }
  return message.empty() ? fields : std::vector<std::string>{};
}

template <typename T>
bool number_of(const std::string& text, T& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

Status send_message(int socket, const std::string& message, const std::vector<int>& fds) {
  if (fds.size() > kMaxFds) {
    return fail("launcher: more descriptors than a message carries");
  }
  iovec iov{.iov_base = const_cast<char*>(message.data()), .iov_len = message.size()};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * kMaxFds)> control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&msg);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  while (::sendmsg(socket, &msg, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) {
      return fail_errno("launcher: sendmsg", errno);
    }
  }
  return ok();
}

// One message and the descriptors it carries; an empty message when the peer closed.
Result<std::string> receive_message(int socket, std::vector<UniqueFd>& fds) {
  std::string message(kMaxMessageBytes, '\0');
  iovec iov{.iov_base = message.data(), .iov_len = message.size()};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * kMaxFds)> control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n = 0;
  while ((n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC)) < 0) {
    if (errno != EINTR) {
      return fail_errno("launcher: recvmsg", errno);
    }
  }
  for (cmsghdr* header = CMSG_FIRSTHDR(&msg); header != nullptr;
       header = CMSG_NXTHDR(&msg, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    return fail("launcher: a message or its descriptors did not fit");
  }
  message.resize(static_cast<size_t>(n));
  return message;
}

std::string error_answer(const std::string& why) {
  std::string answer;
  put(answer, "error");
  put(answer, why);
  return answer;
}

constexpr std::string_view kOwnPidNamespace = "own-pid-namespace";
constexpr std::string_view kSamePidNamespace = "same-pid-namespace";

// The launcher's side of a spawn request: [log path, pid namespace, argv...] with the
// descriptors to pass.
std::string spawn_answer(const std::string& vmm_binary, const std::vector<std::string>& fields,
                         const std::vector<UniqueFd>& fds, LaunchedVmm& launched) {
  if (fields.size() < 5 || (fields[2] != kOwnPidNamespace && fields[2] != kSamePidNamespace) ||
      fields[3] != vmm_binary || fields[4] != "restore") {
    return error_answer("the launcher starts only `" + vmm_binary + " restore`");
  }
  std::vector<int> passed;
  passed.reserve(fds.size());
  for (const UniqueFd& fd : fds) {
    passed.push_back(fd.get());
  }
  const std::vector<std::string> argv(fields.begin() + 3, fields.end());
  auto spawned = spawn_with_ready_pipe(argv, fields[1], passed, fields[2] == kOwnPidNamespace);
  if (!spawned) {
    return error_answer(spawned.error().message());
  }
  launched = std::move(*spawned);
  std::string answer;
  put(answer, "ok");
  put(answer, std::to_string(launched.identity.pid));
  put(answer, std::to_string(launched.identity.start_time));
  return answer;
}

std::string reap_answer(const std::vector<std::string>& fields) {
  pid_t pid = 0;
  if (fields.size() != 2 || !number_of(fields[1], pid) || pid <= 0) {
    return error_answer("reap needs a pid");
  }
  int status = 0;
  std::string answer;
  const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
  if (reaped == 0) {
    put(answer, "running");
  } else if (reaped < 0) {
    put(answer, "unknown");
  } else if (WIFEXITED(status)) {
    put(answer, "exited");
    put(answer, std::to_string(WEXITSTATUS(status)));
  } else {
    put(answer, "signaled");
    put(answer, std::to_string(WTERMSIG(status)));
  }
  return answer;
}

std::string network_answer(const std::vector<std::string>& fields,
                           const LauncherProcess::NetworkService& networks) {
  if (fields.size() != 2) {
    return error_answer("network needs one request");
  }
  if (!networks) {
    return error_answer("this launcher makes no clone networks");
  }
  std::string answer;
  put(answer, "ok");
  put(answer, networks(fields[1]));
  return answer;
}

// The launcher's life: one request, one answer, until the daemon closes its end.
[[noreturn]] void serve_daemon(int socket, const std::string& vmm_binary,
                               const LauncherProcess::NetworkService& networks) {
  while (true) {
    std::vector<UniqueFd> fds;
    auto request = receive_message(socket, fds);
    if (!request || request->empty()) {
      ::_exit(request ? 0 : 1);
    }
    const std::vector<std::string> fields = fields_of(*request);
    LaunchedVmm launched;  // its descriptors go to the daemon, then close here
    std::string answer;
    std::vector<int> answer_fds;
    if (!fields.empty() && fields[0] == "spawn") {
      answer = spawn_answer(vmm_binary, fields, fds, launched);
      if (launched.pidfd) {
        answer_fds = {launched.pidfd.get(), launched.ready.get()};
      }
    } else if (!fields.empty() && fields[0] == "reap") {
      answer = reap_answer(fields);
    } else if (!fields.empty() && fields[0] == "network") {
      answer = network_answer(fields, networks);
    } else {
      answer = error_answer("unknown request");
    }
    if (!send_message(socket, answer, answer_fds)) {
      ::_exit(1);
    }
  }
}

}  // namespace

Result<std::unique_ptr<LauncherProcess>> LauncherProcess::start(const std::string& vmm_binary,
                                                                const NetworkService& networks) {
  std::array<int, 2> pair{};
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair.data()) != 0) {
    return fail_errno("launcher: socketpair", errno);
  }
  UniqueFd daemon_end(pair[0]);
  UniqueFd launcher_end(pair[1]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return fail_errno("launcher: fork", errno);
  }
  if (pid == 0) {
    // The launcher: it dies with the daemon, and keeps none of the daemon's descriptors
    // but its socket (and 0-2, for a VMM's spawn to replace).
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != parent) {
      ::_exit(1);
    }
    daemon_end.reset();
    constexpr int kSocket = 3;  // close-on-exec: no VMM inherits it
    if ((launcher_end.get() != kSocket && ::dup3(launcher_end.get(), kSocket, O_CLOEXEC) < 0) ||
        ::close_range(kSocket + 1, ~0U, 0) != 0) {
      ::_exit(1);
    }
    serve_daemon(kSocket, vmm_binary, networks);
  }
  return std::unique_ptr<LauncherProcess>(new LauncherProcess(std::move(daemon_end), pid));
}

LauncherProcess::~LauncherProcess() {
  socket_.reset();  // the launcher reads end-of-file and exits
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

Result<std::string> LauncherProcess::call(const std::string& request, const std::vector<int>& fds,
                                          std::vector<UniqueFd>& received) {
  const std::lock_guard lock(mutex_);
  DSEC_TRY(send_message(socket_.get(), request, fds));
  auto answer = DSEC_TRY(receive_message(socket_.get(), received));
  if (answer.empty()) {
    return fail("the pool's launcher process ended", "restart the daemon");
  }
  return answer;
}

Result<LaunchedVmm> LauncherProcess::spawn(const std::vector<std::string>& argv,
                                           const std::string& log_path,
                                           const std::vector<int>& passed,
                                           bool own_pid_namespace) {
  std::string request;
  put(request, "spawn");
  put(request, log_path);
  put(request, own_pid_namespace ? kOwnPidNamespace : kSamePidNamespace);
  for (const std::string& arg : argv) {
    put(request, arg);
  }
  if (request.size() > kMaxMessageBytes) {
    return fail("launcher: a VMM's command line is too long");
  }
  std::vector<UniqueFd> received;
  const std::vector<std::string> fields = fields_of(DSEC_TRY(call(request, passed, received)));
  if (fields.size() == 2 && fields[0] == "error") {
    return fail(fields[1]);
  }
  LaunchedVmm launched;
  if (fields.size() != 3 || fields[0] != "ok" || received.size() != 2 ||
      !number_of(fields[1], launched.identity.pid) ||
      !number_of(fields[2], launched.identity.start_time)) {
    return fail("launcher: a malformed answer to a spawn");
  }
  launched.pidfd = std::move(received[0]);
  launched.ready = std::move(received[1]);
  return launched;
}

Result<std::string> LauncherProcess::network(const std::string& request) {
  std::string message;
  put(message, "network");
  put(message, request);
  if (message.size() > kMaxMessageBytes) {
    return fail("launcher: a network request is too long");
  }
  std::vector<UniqueFd> received;
  const std::vector<std::string> fields = fields_of(DSEC_TRY(call(message, {}, received)));
  if (fields.size() == 2 && fields[0] == "error") {
    return fail(fields[1]);
  }
  if (fields.size() != 2 || fields[0] != "ok") {
    return fail("launcher: a malformed answer to a network request");
  }
  return fields[1];
}

ProcessEnd LauncherProcess::reap(pid_t pid) {
  std::string request;
  put(request, "reap");
  put(request, std::to_string(pid));
  std::vector<UniqueFd> received;
  auto answer = call(request, {}, received);
  if (!answer) {
    return {.how = "ended (how is unknown: " + answer.error().message() + ")", .exit_status = {}};
  }
  const std::vector<std::string> fields = fields_of(*answer);
  int value = 0;
  if (fields.size() == 2 && fields[0] == "exited" && number_of(fields[1], value)) {
    return {.how = "exited with status " + fields[1], .exit_status = value};
  }
  if (fields.size() == 2 && fields[0] == "signaled" && number_of(fields[1], value)) {
    return {.how = "killed by signal " + fields[1], .exit_status = {}};
  }
  if (fields.size() == 1 && fields[0] == "running") {
    return {.how = "has not ended", .exit_status = {}};
  }
  return {.how = "ended (not this daemon's child: how is unknown)", .exit_status = {}};
}

}  // namespace dsec::pool
