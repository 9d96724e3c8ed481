#include "vmm/image/tree_path.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace dsec::image {
namespace {

// glibc 2.36 has no openat2 wrapper.
int openat2_in_root(int root_fd, const std::string& path, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return static_cast<int>(
      ::syscall(SYS_openat2, root_fd, path.empty() ? "." : path.c_str(), &how, sizeof(how)));
}

Result<UniqueFd> open_existing(int root_fd, const std::string& path) {
  UniqueFd fd(openat2_in_root(root_fd, path, O_PATH | O_DIRECTORY));
  if (!fd) {
    if (errno == ENOSYS) {
      return fail_errno("openat2", errno, "importing an image needs Linux 5.6 or newer");
    }
    return fail_errno(fmt::format("cannot open directory /{} of the image", path), errno);
  }
  return fd;
}

}  // namespace

Result<std::string> clean_tree_path(std::string_view raw, const std::string& what) {
  if (raw.starts_with('/')) {
    return fail(
        fmt::format("{} has the absolute path \"{}\": an archive that writes outside "
                    "its tree is refused",
                    what, raw));
  }
  std::string clean;
  size_t start = 0;
  while (start <= raw.size()) {
    size_t end = raw.find('/', start);
    if (end == std::string_view::npos) {
      end = raw.size();
    }
    const std::string_view component = raw.substr(start, end - start);
    if (component == "..") {
      return fail(
          fmt::format("{} has the path \"{}\", which goes up with \"..\": an archive "
                      "that writes outside its tree is refused",
                      what, raw));
    }
    if (!component.empty() && component != ".") {
      if (!clean.empty()) {
        clean += '/';
      }
      clean += component;
    }
    start = end + 1;
  }
  return clean;
}

TreePathParts split_tree_path(std::string_view clean) {
  const size_t slash = clean.rfind('/');
  if (slash == std::string_view::npos) {
    return {"", clean};
  }
  return {clean.substr(0, slash), clean.substr(slash + 1)};
}

std::string join_tree_path(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (!path.empty()) {
    path += '/';
  }
  path += name;
  return path;
}

Result<UniqueFd> open_tree_dir(int root_fd, std::string_view clean,
                               std::vector<std::string>* created) {
  UniqueFd fd(openat2_in_root(root_fd, std::string(clean), O_PATH | O_DIRECTORY));
  if (fd || errno != ENOENT || created == nullptr) {
    return fd ? std::move(fd) : open_existing(root_fd, std::string(clean));
  }
  // mkdir -p, one component at a time, each prefix resolved inside the tree again (a
  // component may be a symlink, leading elsewhere in the tree).
  UniqueFd parent = DSEC_TRY(open_existing(root_fd, ""));
  std::string prefix;
  size_t start = 0;
  while (start < clean.size()) {
    size_t end = clean.find('/', start);
    if (end == std::string_view::npos) {
      end = clean.size();
    }
    const std::string name(clean.substr(start, end - start));
    const std::string path = join_tree_path(prefix, name);
    UniqueFd next(openat2_in_root(root_fd, path, O_PATH | O_DIRECTORY));
    if (!next && errno == ENOENT) {
      if (::mkdirat(parent.get(), name.c_str(), 0700) != 0) {
        return fail_errno(fmt::format("cannot create directory /{} of the image", path), errno,
                          errno == EEXIST ? "a symlink that leads nowhere is in its way" : "");
      }
      created->push_back(path);
      next = DSEC_TRY(open_existing(root_fd, path));
    } else if (!next) {
      return open_existing(root_fd, path);  // the error, with its message
    }
    parent = std::move(next);
    prefix = path;
    start = end + 1;
  }
  return parent;
}

}  // namespace dsec::image
