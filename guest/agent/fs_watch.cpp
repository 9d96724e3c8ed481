#include "guest/agent/fs_watch.h"

#include <dirent.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>

#include "vmm/common/unique_fd.h"

namespace dsec::agent {
namespace {

constexpr uint32_t kWatchedEvents = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM |
                                    IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW;

class Watcher {
 public:
  Watcher(int fd, uint32_t id, bool recursive) : fd_(fd), id_(id), recursive_(recursive) {}

  // Watches `dir` (and, when recursive, every directory under it); a message, not an
  // Error, when it cannot.
  std::string start(const std::string& dir) {
    inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!inotify_) {
      return std::string("inotify_init1: ") + std::strerror(errno);
    }
    return add(dir, 0);
  }

  int fd() const { return inotify_.get(); }

  // Reads what inotify has and sends it as fs-event frames.
  Status drain() {
    alignas(inotify_event) std::array<char, 16384> buf{};
    while (true) {
      const ssize_t n = ::read(inotify_.get(), buf.data(), buf.size());
      if (n <= 0) {
        return ok();  // EAGAIN: all read
      }
      for (ssize_t at = 0; at < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf.data() + at);
        at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        DSEC_TRY(on_event(*ev));
      }
    }
  }

 private:
  std::string add(const std::string& dir, int depth) {
    if (dirs_.size() >= kMaxWatchedDirectories) {
      return dir + " holds more than " + std::to_string(kMaxWatchedDirectories) +
             " directories to watch; watch a smaller tree";
    }
    const int wd = ::inotify_add_watch(inotify_.get(), dir.c_str(), kWatchedEvents);
    if (wd < 0) {
      return "cannot watch " + dir + ": " + std::strerror(errno);
    }
    dirs_[wd] = dir;
    if (!recursive_ || depth >= 64) {
      return {};
    }
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      return {};
    }
    std::string problem;
    while (const dirent* de = ::readdir(d)) {
      const std::string name = de->d_name;
      if (name == "." || name == ".." || de->d_type != DT_DIR) {
        continue;
      }
      std::string path = dir == "/" ? std::string() : dir;
      path += '/';
      path += name;
      problem = add(path, depth + 1);
      if (!problem.empty()) {
        break;
      }
    }
    ::closedir(d);
    return problem;
  }

  Status on_event(const inotify_event& ev) {
    const auto dir = dirs_.find(ev.wd);
    if (dir == dirs_.end() || ev.len == 0) {
      return ok();  // the watch's own directory, or one it stopped watching
    }
    const std::string name(ev.name, ::strnlen(ev.name, ev.len));
    const std::string path = dir->second == "/" ? "/" + name : dir->second + "/" + name;
    FsEvent out;
    out.path = path;
    if (ev.mask & IN_CREATE) {
      out.kind = FsEvent::Kind::kCreated;
      if ((ev.mask & IN_ISDIR) && recursive_) {
        (void)add(path, 1);  // past the bound its events are not seen; the rest go on
      }
    } else if (ev.mask & IN_MODIFY) {
      out.kind = FsEvent::Kind::kWritten;
    } else if (ev.mask & IN_DELETE) {
      out.kind = FsEvent::Kind::kRemoved;
    } else if (ev.mask & (IN_MOVED_FROM | IN_MOVED_TO)) {
      out.kind = (ev.mask & IN_MOVED_TO) ? FsEvent::Kind::kCreated : FsEvent::Kind::kRenamed;
    } else if (ev.mask & IN_ATTRIB) {
      out.kind = FsEvent::Kind::kChmod;
    } else {
      return ok();
    }
    if (out.path.size() > kMaxPathLen) {
      return ok();
    }
    return send_frame(fd_, MessageType::kFsEvent, id_, encode(out));
  }

  int fd_;
  uint32_t id_;
  bool recursive_;
  UniqueFd inotify_;
  std::map<int, std::string> dirs_;
};

}  // namespace

Status handle_fs_watch(int fd, FrameReader& reader, uint32_t id, const FsWatchRequest& req) {
  Watcher watcher(fd, id, req.recursive);
  if (const std::string problem = watcher.start(req.path); !problem.empty()) {
    return send_frame(fd, MessageType::kError, id, encode(ErrorReply{problem}));
  }
  DSEC_TRY(send_frame(fd, MessageType::kOk, id, {}));
  while (true) {
    std::array<pollfd, 2> fds{pollfd{watcher.fd(), POLLIN, 0}, pollfd{fd, POLLIN, 0}};
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      return fail_errno("fs-watch: poll", errno);
    }
    if (fds[0].revents != 0) {
      DSEC_TRY(watcher.drain());
    }
    if (fds[1].revents != 0) {
      // The host sends nothing more: what comes is its close (or a frame out of place).
      auto more = DSEC_TRY(reader.fill());
      if (!more) {
        return ok();
      }
      return fail("fs-watch: the host sent a frame on a watch's connection");
    }
  }
}

}  // namespace dsec::agent
