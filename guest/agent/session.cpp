#include "guest/agent/session.h"

#include <fcntl.h>
#include <linux/random.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <vector>

#include "guest/agent/fs_requests.h"
#include "guest/agent/fs_watch.h"
#include "guest/agent/process_spawn.h"
#include "vmm/agent/frame_io.h"
#include "vmm/agent/protocol.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Output still open after the command exited belongs to something it left running in
// the background: the exec drains it this long, then stops waiting for it.
constexpr auto kDrainAfterExit = std::chrono::milliseconds(200);
// Where the kernel has no pidfd, how often the exec loop looks for the command's exit.
constexpr int kReapTickMs = 50;

// A pidfd for `pid` (Linux 5.3): readable once the child exits, so the exec loop sleeps
// until something happens instead of polling waitpid (each tick was up to 50 ms of a
// command's round trip). Invalid where the kernel lacks it.
UniqueFd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return UniqueFd();
#endif
}

// Milliseconds until `when` for poll(), rounded up, 0 if it has passed.
int ms_until(Clock::time_point when) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(when - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

Status send_error(int fd, uint32_t id, const std::string& message) {
  return send_frame(fd, MessageType::kError, id, encode(ErrorReply{message}));
}

std::string errno_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

// The child side of an exec: never returns. Reports an exec failure's errno through
// `status` (close-on-exec, so a successful exec closes it with nothing written).
[[noreturn]] void run_child(const ExecRequest& req, int in, int out, int err, int status) {
  ::setsid();  // its own process group: a timeout kills everything it started
  (void)::signal(SIGPIPE, SIG_DFL);
  if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) {
    const int e = errno;
    (void)!::write(status, &e, sizeof e);
    ::_exit(127);
  }
  if (!req.cwd.empty() && ::chdir(req.cwd.c_str()) != 0) {
    const int e = errno;
    (void)!::write(status, &e, sizeof e);
    ::_exit(127);
  }
  for (const auto& e : req.env) {
    ::putenv(const_cast<char*>(e.c_str()));
  }
  std::vector<char*> argv;
  argv.reserve(req.argv.size() + 1);
  for (const auto& a : req.argv) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int e = errno;
  (void)!::write(status, &e, sizeof e);
  ::_exit(127);
}

ExitStatus exit_status_of(int wstatus, bool timed_out) {
  if (timed_out) {
    return {ExitStatus::Kind::kTimedOut, WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0};
  }
  if (WIFSIGNALED(wstatus)) {
    return {ExitStatus::Kind::kSignaled, WTERMSIG(wstatus)};
  }
  return {ExitStatus::Kind::kExited, WEXITSTATUS(wstatus)};
}

// Runs the request's command, streaming its output, feeding its stdin from kStdin frames,
// and killing its process group when the timeout fires or the host goes away.
Status handle_exec(int fd, FrameReader& reader, uint32_t id, const ExecRequest& req) {
  UniqueFd out_r, out_w, err_r, err_w, in_r, in_w, st_r, st_w;
  DSEC_TRY(make_pipe(out_r, out_w));
  DSEC_TRY(make_pipe(err_r, err_w));
  DSEC_TRY(make_pipe(st_r, st_w));
  if (req.stdin_open) {
    DSEC_TRY(make_pipe(in_r, in_w));
  } else {
    in_r.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in_r) {
      return fail_errno("open /dev/null", errno);
    }
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    return send_error(fd, id, errno_text("cannot start '" + req.argv[0] + "': fork", errno));
  }
  if (pid == 0) {
    run_child(req, in_r.get(), out_w.get(), err_w.get(), st_w.get());
  }
  out_w.reset();
  err_w.reset();
  in_r.reset();
  st_w.reset();
  int exec_errno = 0;
  if (::read(st_r.get(), &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
    ::waitpid(pid, nullptr, 0);
    return send_error(fd, id, errno_text("cannot run '" + req.argv[0] + "'", exec_errno));
  }
  if (in_w) {
    ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);
  }
  const UniqueFd pidfd = open_pidfd(pid);

  const auto deadline = Clock::now() + std::chrono::milliseconds(req.timeout_ms);
  bool timed_out = false, host_gone = false, stdin_closing = false;
  bool exited = false;
  int wstatus = 0;
  Clock::time_point exited_at{};
  std::deque<uint8_t> stdin_pending;
  std::array<uint8_t, kMaxChunk> buf{};
  Status failure = ok();

  // Frames already read with the request (stdin sent right after it) or with the last fill().
  const auto drain_frames = [&] {
    while (!host_gone) {
      auto frame = reader.buffered();
      if (!frame) {
        host_gone = true;
        failure = std::unexpected(frame.error());
        return;
      }
      if (!*frame) {
        return;
      }
      if ((*frame)->type == MessageType::kStdin && in_w && !stdin_closing) {
        stdin_pending.insert(stdin_pending.end(), (*frame)->payload.begin(),
                             (*frame)->payload.end());
      } else if ((*frame)->type == MessageType::kStdinClose && in_w) {
        stdin_closing = true;
      } else {
        host_gone = true;
        failure = fail(
            "exec: unexpected " +
            std::string(message_type_name(static_cast<uint16_t>((*frame)->type)).value_or("?")) +
            " frame while a command runs");
      }
    }
  };
  drain_frames();

  while (out_r || err_r || !exited) {
    if (!exited) {
      const pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
      if (r == pid) {
        exited = true;
        exited_at = Clock::now();
      }
    }
    if (exited && ((!out_r && !err_r) || Clock::now() - exited_at > kDrainAfterExit)) {
      break;
    }
    if (!exited && !timed_out && req.timeout_ms > 0 && Clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      timed_out = true;
    }
    std::array<pollfd, 5> fds{};
    nfds_t n = 0;
    const auto add = [&](int f, short events) { fds[n++] = pollfd{f, events, 0}; };
    if (out_r) {
      add(out_r.get(), POLLIN);
    }
    if (err_r) {
      add(err_r.get(), POLLIN);
    }
    if (!host_gone) {
      add(fd, POLLIN);
    }
    if (in_w && !stdin_pending.empty()) {
      add(in_w.get(), POLLOUT);
    }
    if (pidfd && !exited) {
      add(pidfd.get(), POLLIN);  // wakes the loop's waitpid above
    }
    // Sleep until an fd is ready or the next moment the loop acts on: the end of the
    // drain after the exit, or the timeout.
    int wait_ms = -1;
    if (exited) {
      wait_ms = ms_until(exited_at + kDrainAfterExit + std::chrono::milliseconds(1));
    } else if (!timed_out && req.timeout_ms > 0) {
      wait_ms = ms_until(deadline);
    }
    if (!pidfd && !exited) {
      wait_ms = wait_ms < 0 ? kReapTickMs : std::min(wait_ms, kReapTickMs);
    }
    ::poll(fds.data(), n, wait_ms);
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      const int f = fds[i].fd;
      if (f == out_r.get() || f == err_r.get()) {
        const ssize_t got = ::read(f, buf.data(), buf.size());
        if (got > 0) {
          const auto type = f == out_r.get() ? MessageType::kStdout : MessageType::kStderr;
          if (auto s = send_frame(fd, type, id, std::span(buf.data(), static_cast<size_t>(got)));
              !s) {
            host_gone = true;
            failure = s;
          }
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          (f == out_r.get() ? out_r : err_r).reset();
        }
      } else if (f == fd) {
        auto more = reader.fill();
        if (!more || !*more) {
          host_gone = true;  // nobody to answer: end the command
          if (!more) {
            failure = std::unexpected(more.error());
          }
          continue;
        }
        drain_frames();
      } else if (in_w && f == in_w.get()) {
        std::vector<uint8_t> chunk(
            stdin_pending.begin(),
            stdin_pending.begin() + std::min<size_t>(stdin_pending.size(), kMaxChunk));
        const ssize_t put = ::write(in_w.get(), chunk.data(), chunk.size());
        if (put > 0) {
          stdin_pending.erase(stdin_pending.begin(), stdin_pending.begin() + put);
        } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
          stdin_pending.clear();  // the command closed its stdin
          in_w.reset();
        }
      }
    }
    if (in_w && stdin_closing && stdin_pending.empty()) {
      in_w.reset();
    }
    if (host_gone && !exited) {
      ::kill(-pid, SIGKILL);
    }
  }
  if (!exited) {
    ::waitpid(pid, &wstatus, 0);
  }
  if (host_gone) {
    if (!failure) {
      return failure;
    }
    return fail("exec: the host went away; the command was killed");
  }
  return send_frame(fd, MessageType::kExit, id, encode(exit_status_of(wstatus, timed_out)));
}

Status handle_write_file(int fd, FrameReader& reader, uint32_t id, const WriteFileRequest& req) {
  const std::string tmp = req.path + ".dsec-partial-" + std::to_string(::getpid());
  UniqueFd file(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!file) {
    return send_error(fd, id, errno_text("cannot create " + req.path, errno));
  }
  uint64_t received = 0;
  std::string error;
  while (true) {
    auto frame = DSEC_TRY(reader.next());
    if (!frame) {
      ::unlink(tmp.c_str());
      return fail("write-file: the host closed the connection before file-end");
    }
    if (frame->type == MessageType::kFileEnd) {
      break;
    }
    if (frame->type != MessageType::kFileData) {
      ::unlink(tmp.c_str());
      return send_error(fd, id, "write-file: unexpected frame type during the transfer");
    }
    received += frame->payload.size();
    if (received > req.size) {
      ::unlink(tmp.c_str());
      return send_error(
          fd, id,
          "write-file: more data than the announced " + std::to_string(req.size) + " bytes");
    }
    if (error.empty()) {
      if (auto s = write_all(file.get(), frame->payload); !s) {
        error = "cannot write " + req.path + ": " + s.error().message();
      }
    }
  }
  if (error.empty() && received != req.size) {
    error = "write-file: " + std::to_string(received) + " bytes arrived, " +
            std::to_string(req.size) + " were announced";
  }
  if (error.empty() && (::fchmod(file.get(), req.mode) != 0 || ::fsync(file.get()) != 0)) {
    error = errno_text("cannot finish " + req.path, errno);
  }
  if (error.empty() && ::rename(tmp.c_str(), req.path.c_str()) != 0) {
    error = errno_text("cannot move the file into place at " + req.path, errno);
  }
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    return send_error(fd, id, error);
  }
  return send_frame(fd, MessageType::kOk, id, {});
}

Status handle_read_file(int fd, uint32_t id, const ReadFileRequest& req) {
  UniqueFd file(::open(req.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) {
    return send_error(fd, id, errno_text("cannot open " + req.path, errno));
  }
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) {
    return send_error(fd, id, errno_text("cannot stat " + req.path, errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return send_error(fd, id, req.path + " is not a regular file");
  }
  DSEC_TRY(send_frame(fd, MessageType::kFileInfo, id,
                      encode(FileInfo{static_cast<uint64_t>(st.st_size), st.st_mode & 07777U})));
  // Exactly the size announced: the host refuses a byte more, and a file that grows while
  // it is read (a log) is copied as it was when opened.
  std::array<uint8_t, kMaxChunk> buf{};
  auto left = static_cast<uint64_t>(st.st_size);
  while (left > 0) {
    const ssize_t got = ::read(file.get(), buf.data(), std::min<uint64_t>(buf.size(), left));
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      return send_error(fd, id, errno_text("cannot read " + req.path, errno));
    }
    if (got == 0) {
      return send_error(fd, id, req.path + " shrank while it was read");
    }
    DSEC_TRY(send_frame(fd, MessageType::kFileData, id,
                        std::span(buf.data(), static_cast<size_t>(got))));
    left -= static_cast<uint64_t>(got);
  }
  return send_frame(fd, MessageType::kFileEnd, id, {});
}

// A restored clone: the kernel's RNG gets the host's fresh bytes and is reseeded at once,
// so that no two clones of one snapshot draw the same numbers, and the wall clock jumps to
// the host's (it stood still in the snapshot).
Status sync_clone(const CloneSyncRequest& req) {
  const UniqueFd random(::open("/dev/urandom", O_WRONLY | O_CLOEXEC));
  if (!random) {
    return fail_errno("clone sync: opening /dev/urandom", errno);
  }
  // struct rand_pool_info: entropy_count (bits credited), buf_size (bytes), then the bytes.
  std::vector<uint8_t> info(2 * sizeof(int) + req.entropy.size());
  const int bits = static_cast<int>(req.entropy.size() * 8);
  const int size = static_cast<int>(req.entropy.size());
  std::memcpy(info.data(), &bits, sizeof(int));
  std::memcpy(info.data() + sizeof(int), &size, sizeof(int));
  std::memcpy(info.data() + 2 * sizeof(int), req.entropy.data(), req.entropy.size());
  if (::ioctl(random.get(), RNDADDENTROPY, info.data()) != 0) {
    return fail_errno("clone sync: RNDADDENTROPY", errno);
  }
  if (::ioctl(random.get(), RNDRESEEDCRNG) != 0) {
    return fail_errno("clone sync: RNDRESEEDCRNG", errno);
  }
  timespec now{};
  now.tv_sec = static_cast<time_t>(req.realtime_ns / 1000000000);
  now.tv_nsec = static_cast<long>(req.realtime_ns % 1000000000);
  if (::clock_settime(CLOCK_REALTIME, &now) != 0) {
    return fail_errno("clone sync: setting the wall clock", errno);
  }
  return ok();
}

Status serve_first(int fd, FrameReader& reader, const Frame& f, const SessionOptions& options) {
  switch (f.type) {
    case MessageType::kHealth:
      return send_frame(fd, MessageType::kHealthOk, f.request_id,
                        encode(HealthReply{options.agent_version, uptime_ms()}));
    case MessageType::kExec: {
      auto req = decode_exec_request(f.payload);
      if (!req) {
        return send_error(fd, f.request_id, req.error().message());
      }
      return handle_exec(fd, reader, f.request_id, *req);
    }
    case MessageType::kWriteFile: {
      auto req = decode_write_file_request(f.payload);
      if (!req) {
        return send_error(fd, f.request_id, req.error().message());
      }
      return handle_write_file(fd, reader, f.request_id, *req);
    }
    case MessageType::kCloneSync: {
      auto req = decode_clone_sync_request(f.payload);
      if (!req) {
        return send_error(fd, f.request_id, req.error().message());
      }
      if (auto synced = sync_clone(*req); !synced) {
        return send_error(fd, f.request_id, synced.error().message());
      }
      return send_frame(fd, MessageType::kOk, f.request_id, {});
    }
    case MessageType::kReadFile: {
      auto req = decode_read_file_request(f.payload);
      if (!req) {
        return send_error(fd, f.request_id, req.error().message());
      }
      return handle_read_file(fd, f.request_id, *req);
    }
    case MessageType::kFsStat:
    case MessageType::kFsMkdir:
    case MessageType::kFsRemove: {
      auto req = decode_fs_path(f.payload);
      if (!req) {
        return send_error(fd, f.request_id, req.error().message());
      }
      return f.type == MessageType::kFsStat    ? handle_fs_stat(fd, f.request_id, *req)
             : f.type == MessageType::kFsMkdir ? handle_fs_mkdir(fd, f.request_id, *req)
                                               : handle_fs_remove(fd, f.request_id, *req);
    }
    case MessageType::kFsList: {
      auto req = decode_fs_list_request(f.payload);
      if (!req) {
        return send_error(fd, f.request_id, req.error().message());
      }
      return handle_fs_list(fd, f.request_id, *req);
    }
    case MessageType::kFsMove: {
      auto req = decode_fs_move_request(f.payload);
      if (!req) {
        return send_error(fd, f.request_id, req.error().message());
      }
      return handle_fs_move(fd, f.request_id, *req);
    }
    case MessageType::kFsWatch: {
      auto req = decode_fs_watch_request(f.payload);
      if (!req) {
        return send_error(fd, f.request_id, req.error().message());
      }
      return handle_fs_watch(fd, reader, f.request_id, *req);
    }
    default:
      return send_error(fd, f.request_id,
                        std::string("a ") +
                            message_type_name(static_cast<uint16_t>(f.type)).value_or("?") +
                            " frame cannot start a request");
  }
}

Status serve(int fd, const SessionOptions& options) {
  FrameReader reader(fd);
  auto first = DSEC_TRY(reader.next());
  if (!first) {
    return ok();  // connected and left: a readiness probe
  }
  return serve_first(fd, reader, *first, options);
}

int report(const Status& s) {
  if (!s) {
    (void)std::fprintf(stderr, "dsec-agent: %s\n", s.error().message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

uint64_t uptime_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

int serve_connection(int fd, const SessionOptions& options) {
  return report(serve(fd, options));
}

int serve_request(int fd, FrameReader& reader, const Frame& first, const SessionOptions& options) {
  return report(serve_first(fd, reader, first, options));
}

}  // namespace dsec::agent
