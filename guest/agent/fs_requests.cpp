#include "guest/agent/fs_requests.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "guest/agent/passwd.h"
#include "vmm/agent/frame_io.h"

namespace dsec::agent {
namespace {

// How deep a tree fs-remove takes apart.
constexpr int kMaxRemoveDepth = 256;
// An entry's most bytes on the wire: two paths, two names, and its numbers.
constexpr size_t kMaxEntryBytes = 2 * kMaxPathLen + 2 * kMaxNameLen + 64;

Status send_error(int fd, uint32_t id, const std::string& message) {
  return send_frame(fd, MessageType::kError, id, encode(ErrorReply{message}));
}

std::string errno_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

std::string joined(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

FsEntry entry_of(const std::string& path, const struct stat& st, AccountNames& names) {
  FsEntry e;
  e.path = path;
  e.type = S_ISREG(st.st_mode)   ? FsEntry::Type::kFile
           : S_ISDIR(st.st_mode) ? FsEntry::Type::kDirectory
           : S_ISLNK(st.st_mode) ? FsEntry::Type::kSymlink
                                 : FsEntry::Type::kOther;
  e.size = static_cast<uint64_t>(st.st_size);
  e.mode = st.st_mode & 07777U;
  e.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  e.owner = names.user(st.st_uid).substr(0, kMaxNameLen);
  e.group = names.group(st.st_gid).substr(0, kMaxNameLen);
  if (S_ISLNK(st.st_mode)) {
    std::vector<char> target(kMaxPathLen);
    const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n > 0) {
      e.symlink_target.assign(target.data(), static_cast<size_t>(n));
    }
  }
  return e;
}

// A listing, sent in frames as it is gathered.
class Lister {
 public:
  Lister(int fd, uint32_t id) : fd_(fd), id_(id) {}

  // Walks `dir` to `depth` more levels; an error message (not an Error) when one is found.
  // A subdirectory that cannot be read is left out (its entry is listed).
  Result<std::string> walk(const std::string& dir, uint32_t depth, bool top = true) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      return top ? errno_text("cannot list " + dir, errno) : std::string();
    }
    std::vector<std::string> subdirs;
    std::string problem;
    while (const dirent* de = ::readdir(d)) {
      const std::string name = de->d_name;
      if (name == "." || name == "..") {
        continue;
      }
      const std::string path = joined(dir, name);
      struct stat st {};
      if (path.size() > kMaxPathLen || ::lstat(path.c_str(), &st) != 0) {
        continue;  // gone since readdir, or too long a path to report
      }
      if (++count_ > kMaxListEntries) {
        problem = dir + " holds more than " + std::to_string(kMaxListEntries) +
                  " entries to that depth; list it with a smaller depth";
        break;
      }
      batch_.entries.push_back(entry_of(path, st, names_));
      if (auto s = flush_if_full(); !s) {
        ::closedir(d);
        return std::unexpected(s.error());
      }
      if (S_ISDIR(st.st_mode) && depth > 1) {
        subdirs.push_back(path);
      }
    }
    ::closedir(d);
    if (!problem.empty()) {
      return problem;
    }
    for (const auto& sub : subdirs) {
      std::string p = DSEC_TRY(walk(sub, depth - 1, false));
      if (!p.empty()) {
        return p;
      }
    }
    return std::string();
  }

  Status finish() {
    if (!batch_.entries.empty()) {
      DSEC_TRY(send_frame(fd_, MessageType::kFsEntries, id_, encode(batch_)));
      batch_.entries.clear();
    }
    return ok();
  }

 private:
  Status flush_if_full() {
    if (batch_.entries.size() < kMaxEntriesPerFrame &&
        (batch_.entries.size() + 1) * kMaxEntryBytes <= kMaxPayload) {
      return ok();
    }
    return finish();
  }

  int fd_;
  uint32_t id_;
  FsEntries batch_;
  AccountNames names_;
  size_t count_ = 0;
};

// Removes `name` in `dirfd`, and everything under it when it is a directory; symlinks are
// removed, never followed.
std::string remove_at(int dirfd, const std::string& name, const std::string& shown, int depth) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0) {
    return {};
  }
  if (errno != EISDIR && errno != EPERM) {
    return errno_text("cannot remove " + shown, errno);
  }
  if (depth > kMaxRemoveDepth) {
    return shown + " is more than " + std::to_string(kMaxRemoveDepth) +
           " directories deep; remove its deepest parts first";
  }
  const int sub = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) {
    return errno_text("cannot remove " + shown, errno);
  }
  DIR* d = ::fdopendir(sub);
  if (d == nullptr) {
    ::close(sub);
    return errno_text("cannot list " + shown, errno);
  }
  std::vector<std::string> names;
  while (const dirent* de = ::readdir(d)) {
    const std::string n = de->d_name;
    if (n != "." && n != "..") {
      names.push_back(n);
    }
  }
  std::string problem;
  for (const auto& n : names) {
    std::string path = shown;
    path += '/';
    path += n;
    problem = remove_at(sub, n, path, depth + 1);
    if (!problem.empty()) {
      break;
    }
  }
  ::closedir(d);
  if (problem.empty() && ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) {
    problem = errno_text("cannot remove " + shown, errno);
  }
  return problem;
}

}  // namespace

Status handle_fs_stat(int fd, uint32_t id, const FsPath& req) {
  struct stat st {};
  if (::lstat(req.path.c_str(), &st) != 0) {
    return send_error(fd, id, errno_text("cannot stat " + req.path, errno));
  }
  AccountNames names;
  return send_frame(fd, MessageType::kFsStatReply, id, encode(entry_of(req.path, st, names)));
}

Status handle_fs_list(int fd, uint32_t id, const FsListRequest& req) {
  Lister lister(fd, id);
  const std::string problem = DSEC_TRY(lister.walk(req.path, req.depth));
  DSEC_TRY(lister.finish());
  if (!problem.empty()) {
    return send_error(fd, id, problem);
  }
  return send_frame(fd, MessageType::kOk, id, {});
}

Status handle_fs_mkdir(int fd, uint32_t id, const FsPath& req) {
  bool created = false;
  size_t at = 1;
  while (at <= req.path.size()) {
    const size_t slash = req.path.find('/', at);
    const std::string prefix = req.path.substr(0, slash);
    at = slash == std::string::npos ? req.path.size() + 1 : slash + 1;
    if (prefix.empty() || prefix.back() == '/') {
      continue;
    }
    if (::mkdir(prefix.c_str(), 0755) == 0) {
      created = true;
      continue;
    }
    struct stat st {};
    if (errno != EEXIST || ::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return send_error(fd, id,
                        errno == EEXIST ? prefix + " exists and is not a directory"
                                        : errno_text("cannot make the directory " + prefix, errno));
    }
    created = false;
  }
  return send_frame(fd, MessageType::kFsMade, id, encode(FsMade{created}));
}

Status handle_fs_move(int fd, uint32_t id, const FsMoveRequest& req) {
  if (::rename(req.from.c_str(), req.to.c_str()) != 0) {
    return send_error(fd, id, errno_text("cannot move " + req.from + " to " + req.to, errno));
  }
  return send_frame(fd, MessageType::kOk, id, {});
}

Status handle_fs_remove(int fd, uint32_t id, const FsPath& req) {
  if (req.path.find_first_not_of('/') == std::string::npos) {
    return send_error(fd, id, "the agent does not remove the root directory");
  }
  const std::string problem = remove_at(AT_FDCWD, req.path, req.path, 0);
  if (!problem.empty()) {
    return send_error(fd, id, problem);
  }
  return send_frame(fd, MessageType::kOk, id, {});
}

}  // namespace dsec::agent
