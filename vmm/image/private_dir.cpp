#include "vmm/image/private_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace dsec::image {
namespace {

constexpr mode_t kOwnerAll = 0700;

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};
using DirStream = std::unique_ptr<DIR, DirCloser>;

// Opens the directory `name` in `dir_fd` to empty it, making it readable first if needed.
Result<UniqueFd> open_for_removal(int dir_fd, const std::string& name) {
  const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::openat(dir_fd, name.c_str(), flags));
  if (!fd && errno == EACCES && ::fchmodat(dir_fd, name.c_str(), kOwnerAll, 0) == 0) {
    fd.reset(::openat(dir_fd, name.c_str(), flags));
  }
  if (!fd) {
    return fail_errno("cannot open directory " + name + " to remove it", errno);
  }
  return fd;
}

// unlinkat, once more after making the directory writable if it was not.
int unlink_in(int dir_fd, const char* name, int flags) {
  int rc = ::unlinkat(dir_fd, name, flags);
  if (rc != 0 && (errno == EACCES || errno == EPERM) && ::fchmod(dir_fd, kOwnerAll) == 0) {
    rc = ::unlinkat(dir_fd, name, flags);
  }
  return rc;
}

// The next entry of `dir` other than "." and "..", or nullptr at its end.
const char* next_name(DIR* dir) {
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
      return entry->d_name;
    }
  }
  return nullptr;
}

}  // namespace

Status remove_tree_at(int dir_fd, const std::string& name) {
  // dir_fd itself may be the user's: only the directories below `name` get their modes
  // changed.
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) {
    return ok();
  }
  if (errno != EISDIR) {
    return fail_errno("cannot remove " + name, errno);
  }
  // Depth first, holding only the directory being emptied: the names from dir_fd down to it
  // lead back up ("..", in a tree nobody else changes).
  std::vector<std::string> names{name};
  UniqueFd current = DSEC_TRY(open_for_removal(dir_fd, name));
  while (true) {
    DirStream listing(::fdopendir(::dup(current.get())));
    if (!listing) {
      return fail_errno("cannot list " + names.back() + " to remove it", errno);
    }
    std::string subdirectory;
    while (const char* entry = next_name(listing.get())) {
      if (unlink_in(current.get(), entry, 0) == 0 || errno == ENOENT) {
        continue;
      }
      if (errno != EISDIR) {
        return fail_errno(fmt::format("cannot remove {} in {}", entry, names.back()), errno);
      }
      subdirectory = entry;
      break;
    }
    listing.reset();
    if (!subdirectory.empty()) {
      current = DSEC_TRY(open_for_removal(current.get(), subdirectory));
      names.push_back(std::move(subdirectory));
      continue;
    }
    // `current` is empty: remove it from its parent, then go on with the parent.
    const std::string emptied = std::move(names.back());
    names.pop_back();
    UniqueFd parent(names.empty()
                        ? ::dup(dir_fd)
                        : ::openat(current.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent) {
      return fail_errno("cannot go back up from " + emptied, errno);
    }
    const int removed = names.empty() ? ::unlinkat(parent.get(), emptied.c_str(), AT_REMOVEDIR)
                                      : unlink_in(parent.get(), emptied.c_str(), AT_REMOVEDIR);
    if (removed != 0 && errno != ENOENT) {
      return fail_errno("cannot remove directory " + emptied, errno);
    }
    if (names.empty()) {
      return ok();
    }
    current = std::move(parent);
  }
}

Result<PrivateDir> PrivateDir::create(const std::filesystem::path& parent,
                                      std::string_view prefix) {
  std::string pattern = (parent / prefix).string() + ".XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return fail_errno(fmt::format("cannot create a working directory in {}", parent.string()),
                      errno, "check that the directory exists and is writable");
  }
  UniqueFd fd(::open(pattern.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    const int saved = errno;
    ::rmdir(pattern.c_str());
    return fail_errno("cannot open " + pattern, saved);
  }
  return PrivateDir(std::move(pattern), std::move(fd));
}

PrivateDir::PrivateDir(PrivateDir&& other) noexcept
    : path_(std::exchange(other.path_, {})), fd_(std::move(other.fd_)) {}

PrivateDir::~PrivateDir() {
  if (path_.empty()) {
    return;
  }
  fd_.reset();
  const std::filesystem::path parent = path_.parent_path();
  const UniqueFd parent_fd(
      ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (parent_fd) {
    (void)remove_tree_at(parent_fd.get(), path_.filename().string());
  }
}

}  // namespace dsec::image
