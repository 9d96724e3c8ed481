#include "vmm/image/layer_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "vmm/common/unique_fd.h"
#include "vmm/image/private_dir.h"
#include "vmm/image/tree_path.h"

namespace dsec::image {
namespace {

constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kOpaqueWhiteout = ".wh..wh..opq";
// overlayfs keeps its own state in these (whiteouts, opaque and redirected directories): a
// layer must not steer the guest's overlay through the image.
constexpr std::string_view kOverlayXattrPrefix = "trusted.overlay.";

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};

// The names in the directory `dir_fd` (an O_PATH descriptor will do).
Result<std::vector<std::string>> list_names(int dir_fd, const std::string& path) {
  UniqueFd fd(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::unique_ptr<DIR, DirCloser> dir(fd ? ::fdopendir(fd.get()) : nullptr);
  if (!dir) {
    return fail_errno(fmt::format("cannot list directory /{} of the image", path), errno);
  }
  (void)fd.release();  // the stream owns it now
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir.get())) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
      names.emplace_back(entry->d_name);
    }
  }
  return names;
}

timespec entry_mtime(archive_entry* entry) {
  if (archive_entry_mtime_is_set(entry) == 0) {
    return {};
  }
  return {archive_entry_mtime(entry), archive_entry_mtime_nsec(entry)};
}

bool is_missing(const Error& error) {
  return error.os_errno() == ENOENT || error.os_errno() == ENOTDIR;
}

}  // namespace

// An entry of a layer and where it goes: `name` in the directory `parent`.
struct TreeBuilder::Node {
  int parent;
  std::string name;
  std::string path;  // clean, in the tree
  archive_entry* entry;
};

struct TreeBuilder::Layer {
  TarStream& stream;
  LayerStats stats;
  // Every path this layer put in the tree, with its ancestors: its own whiteouts spare them.
  std::unordered_set<std::string> added;

  void mark_added(std::string path) {
    while (added.insert(path).second && !path.empty()) {
      path = std::string(split_tree_path(path).dir);
    }
  }
  Status fail_entry(const std::string& path, const std::string& why) const {
    return fail(fmt::format("{}: entry /{}: {}", stream.what(), path, why));
  }
};

// The entry's permission bits. Without root the tree's files are the importer's own, and
// mkfs.erofs reads them as such: each keeps what its owner needs for that (read, and search
// for a directory).
mode_t TreeBuilder::mode_of(archive_entry* entry) const {
  const mode_t mode = archive_entry_perm(entry) & 07777;
  if (keep_owners_) {
    return mode;
  }
  return mode | (archive_entry_filetype(entry) == AE_IFDIR ? S_IRUSR | S_IXUSR : S_IRUSR);
}

TreeBuilder::TreeBuilder(int root_fd, UnpackLimits limits, bool keep_owners)
    : root_fd_(root_fd), limits_(limits), keep_owners_(keep_owners) {
  dirs_[""] = DirMeta{};  // the root, 0755, unless a layer says otherwise
}

Result<LayerStats> TreeBuilder::apply_layer(TarStream& stream, const std::stop_token& stop) {
  Layer layer{.stream = stream, .stats = {}, .added = {}};
  while (true) {
    if (stop.stop_requested()) {
      return fail("interrupted");
    }
    archive_entry* entry = nullptr;
    const int rc = archive_read_next_header(stream.get(), &entry);
    if (rc == ARCHIVE_EOF) {
      return layer.stats;
    }
    if (rc == ARCHIVE_RETRY) {
      continue;
    }
    if (rc < ARCHIVE_WARN) {
      return std::unexpected(stream.error("reading"));
    }
    DSEC_TRY(apply_entry(layer, entry, stop));
  }
}

Status TreeBuilder::apply_entry(Layer& layer, archive_entry* entry, const std::stop_token& stop) {
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr) {
    return fail(layer.stream.what() + ": an entry has no path");
  }
  const std::string path = DSEC_TRY(clean_tree_path(raw, layer.stream.what() + ": an entry"));
  if (++total_entries_ > limits_.max_entries) {
    return fail(fmt::format("{}: the layers hold more than {} entries", layer.stream.what(),
                            limits_.max_entries));
  }
  ++layer.stats.entries;
  const auto [dir, name] = split_tree_path(path);
  if (name.starts_with(kWhiteoutPrefix)) {
    return apply_whiteout(layer, dir, name);
  }
  layer.mark_added(path);
  const timespec mtime = entry_mtime(entry);
  newest_mtime_ = std::max<int64_t>(newest_mtime_, mtime.tv_sec);
  const mode_t type = archive_entry_filetype(entry);
  const char* hardlink = archive_entry_hardlink(entry);

  if (path.empty()) {  // "./": the root's own mode and time
    if (type != AE_IFDIR || hardlink != nullptr) {
      return layer.fail_entry(path, "the root of the tree must be a directory");
    }
    dirs_[""] = DirMeta{.mode = mode_of(entry), .mtime = mtime};
    return set_metadata(layer, root_fd_,
                        Node{.parent = -1, .name = "", .path = path, .entry = entry});
  }

  std::vector<std::string> created;
  const UniqueFd parent = DSEC_TRY(open_tree_dir(root_fd_, dir, &created));
  for (const std::string& made : created) {
    dirs_[made] = DirMeta{.mode = 0755, .mtime = mtime};
  }
  const Node node{.parent = parent.get(), .name = std::string(name), .path = path, .entry = entry};
  DSEC_TRY(clear_the_way(node, type == AE_IFDIR && hardlink == nullptr));
  if (hardlink != nullptr) {
    return make_hard_link(layer, node, hardlink);
  }
  switch (type) {
    case AE_IFREG:
      return write_file(layer, node, stop);
    case AE_IFDIR:
      return make_directory(layer, node);
    case AE_IFLNK: {
      const char* target = archive_entry_symlink(entry);
      if (target == nullptr || *target == '\0') {
        return layer.fail_entry(path, "a symlink without a target");
      }
      if (::symlinkat(target, node.parent, node.name.c_str()) != 0) {
        return fail_errno(fmt::format("cannot create symlink /{} of the image", path), errno);
      }
      return set_metadata_at(layer, node, false);
    }
    case AE_IFIFO:
      if (::mknodat(node.parent, node.name.c_str(), S_IFIFO | 0600, 0) != 0) {
        return fail_errno(fmt::format("cannot create FIFO /{} of the image", path), errno);
      }
      return set_metadata_at(layer, node, true);
    case AE_IFCHR:
    case AE_IFBLK:
    case AE_IFSOCK:
      // The guest's /dev is its own devtmpfs; a device node in an image is never needed and
      // would be a way around the sandbox's device rules.
      ++layer.stats.skipped_devices;
      return ok();
    default:
      return layer.fail_entry(path, fmt::format("an entry of unknown type {:o}", type));
  }
}

// What the layers below left at the node's path goes, unless both are directories (merged).
Status TreeBuilder::clear_the_way(const Node& node, bool is_directory) {
  struct stat existing {};
  if (::fstatat(node.parent, node.name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT
               ? ok()
               : fail_errno(fmt::format("cannot look at /{} of the image", node.path), errno);
  }
  if (S_ISDIR(existing.st_mode) && is_directory) {
    return ok();
  }
  return remove_tree_at(node.parent, node.name);
}

// The target is a path of the tree too, resolved inside it like any other, and must be a
// file already there.
Status TreeBuilder::make_hard_link(Layer& layer, const Node& node, const char* raw_target) {
  const std::string target = DSEC_TRY(clean_tree_path(
      raw_target, fmt::format("{}: hard link /{}'s target", layer.stream.what(), node.path)));
  const auto parts = split_tree_path(target);
  auto target_dir = open_tree_dir(root_fd_, parts.dir, nullptr);
  const std::string target_name(parts.name);
  struct stat st {};
  if (!target_dir || target_name.empty() ||
      ::fstatat(target_dir->get(), target_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      S_ISDIR(st.st_mode)) {
    return layer.fail_entry(
        node.path,
        fmt::format("a hard link to /{}, which is not a file of the image (so far)", target));
  }
  if (::linkat(target_dir->get(), target_name.c_str(), node.parent, node.name.c_str(), 0) != 0) {
    return fail_errno(fmt::format("cannot link /{} to /{} in the image", node.path, target), errno);
  }
  return ok();
}

Status TreeBuilder::make_directory(Layer& layer, const Node& node) {
  if (::mkdirat(node.parent, node.name.c_str(), 0700) != 0 && errno != EEXIST) {
    return fail_errno(fmt::format("cannot create directory /{} of the image", node.path), errno);
  }
  const UniqueFd fd(
      ::openat(node.parent, node.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    return fail_errno(fmt::format("cannot open directory /{} of the image", node.path), errno);
  }
  dirs_[node.path] = DirMeta{.mode = mode_of(node.entry), .mtime = entry_mtime(node.entry)};
  return set_metadata(layer, fd.get(), node);
}

Status TreeBuilder::write_file(Layer& layer, const Node& node, const std::stop_token& stop) {
  const int64_t declared =
      archive_entry_size_is_set(node.entry) ? archive_entry_size(node.entry) : 0;
  const auto size = static_cast<uint64_t>(std::max<int64_t>(declared, 0));
  if (size > limits_.max_file_bytes) {
    return layer.fail_entry(node.path, fmt::format("a file of {} bytes, more than the {} a file "
                                                   "may hold",
                                                   size, limits_.max_file_bytes));
  }
  if (total_bytes_ + size > limits_.max_total_bytes) {
    return layer.fail_entry(node.path, fmt::format("the layers hold more than {} bytes of files",
                                                   limits_.max_total_bytes));
  }
  const UniqueFd fd(::openat(node.parent, node.name.c_str(),
                             O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    return fail_errno(fmt::format("cannot create /{} of the image", node.path), errno);
  }
  DSEC_TRY(layer.stream.write_entry_data(fd.get(), size, "/" + node.path, stop));
  total_bytes_ += size;
  layer.stats.bytes += size;
  return set_metadata(layer, fd.get(), node);
}

// Owner, then mode (a chown clears set-user-ID and set-group-ID bits), extended attributes
// and time. A directory gets its mode and time in finish(), after its contents.
Status TreeBuilder::set_metadata(Layer& layer, int fd, const Node& node) {
  archive_entry* entry = node.entry;
  const bool directory = archive_entry_filetype(entry) == AE_IFDIR;
  if (keep_owners_ && ::fchown(fd, static_cast<uid_t>(archive_entry_uid(entry)),
                               static_cast<gid_t>(archive_entry_gid(entry))) != 0) {
    return fail_errno(fmt::format("cannot chown /{} of the image", node.path), errno);
  }
  if (!directory && ::fchmod(fd, mode_of(entry)) != 0) {
    return fail_errno(fmt::format("cannot chmod /{} of the image", node.path), errno);
  }
  archive_entry_xattr_reset(entry);
  const char* name = nullptr;
  const void* value = nullptr;
  size_t size = 0;
  while (archive_entry_xattr_next(entry, &name, &value, &size) == ARCHIVE_OK) {
    if (std::string_view(name).starts_with(kOverlayXattrPrefix) ||
        ::fsetxattr(fd, name, value, size, 0) != 0) {
      ++layer.stats.skipped_xattrs;
    }
  }
  const timespec mtime = entry_mtime(entry);
  const std::array<timespec, 2> times{mtime, mtime};
  if (!directory && ::futimens(fd, times.data()) != 0) {
    return fail_errno(fmt::format("cannot set the time of /{}", node.path), errno);
  }
  return ok();
}

// The same, by name, for what cannot be opened for it: a symlink (its mode is always 0777),
// a FIFO (opening it would block). Their extended attributes are not kept.
Status TreeBuilder::set_metadata_at(Layer& layer, const Node& node, bool with_mode) {
  archive_entry* entry = node.entry;
  const timespec mtime = entry_mtime(entry);
  const std::array<timespec, 2> times{mtime, mtime};
  if ((keep_owners_ &&
       ::fchownat(node.parent, node.name.c_str(), static_cast<uid_t>(archive_entry_uid(entry)),
                  static_cast<gid_t>(archive_entry_gid(entry)), AT_SYMLINK_NOFOLLOW) != 0) ||
      (with_mode && ::fchmodat(node.parent, node.name.c_str(), mode_of(entry), 0) != 0) ||
      ::utimensat(node.parent, node.name.c_str(), times.data(), AT_SYMLINK_NOFOLLOW) != 0) {
    return fail_errno(
        fmt::format("cannot set the owner, mode or time of /{} of the image", node.path), errno);
  }
  layer.stats.skipped_xattrs += static_cast<uint64_t>(archive_entry_xattr_count(entry));
  return ok();
}

Status TreeBuilder::apply_whiteout(Layer& layer, std::string_view dir, std::string_view name) {
  ++layer.stats.whiteouts;
  if (name == kOpaqueWhiteout) {
    auto dir_fd = open_tree_dir(root_fd_, dir, nullptr);
    if (!dir_fd) {
      return is_missing(dir_fd.error()) ? ok() : Status(std::unexpected(dir_fd.error()));
    }
    const std::string dir_text(dir);
    for (const std::string& child : DSEC_TRY(list_names(dir_fd->get(), dir_text))) {
      DSEC_TRY(remove_from_lower(layer, join_tree_path(dir, child)));
    }
    return ok();
  }
  const std::string_view hidden = name.substr(kWhiteoutPrefix.size());
  if (hidden.starts_with(kWhiteoutPrefix)) {
    return ok();  // aufs's own files (.wh..wh.plnk, .wh..wh.aufs): nothing to delete
  }
  if (hidden.empty() || hidden == "." || hidden == "..") {
    return layer.fail_entry(join_tree_path(dir, name), "a whiteout that names no file");
  }
  return remove_from_lower(layer, join_tree_path(dir, hidden));
}

// Deletes what the layers below put at `path`, sparing what this layer added there.
Status TreeBuilder::remove_from_lower(Layer& layer, const std::string& path) {
  const auto [dir, name] = split_tree_path(path);
  auto parent = open_tree_dir(root_fd_, dir, nullptr);
  if (!parent) {
    return is_missing(parent.error()) ? ok() : Status(std::unexpected(parent.error()));
  }
  const std::string name_text(name);
  if (!layer.added.contains(path)) {
    return remove_tree_at(parent->get(), name_text);
  }
  struct stat st {};
  if (::fstatat(parent->get(), name_text.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISDIR(st.st_mode)) {
    return ok();
  }
  auto self = open_tree_dir(root_fd_, path, nullptr);
  if (!self) {
    return std::unexpected(self.error());
  }
  for (const std::string& child : DSEC_TRY(list_names(self->get(), path))) {
    DSEC_TRY(remove_from_lower(layer, join_tree_path(path, child)));
  }
  return ok();
}

Status TreeBuilder::finish() {
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    const auto& [path, meta] = *it;
    // Not through a symlink: a directory a later layer replaced by a symlink is not set.
    auto parts = split_tree_path(path);
    auto parent = open_tree_dir(root_fd_, parts.dir, nullptr);
    if (!parent) {
      if (is_missing(parent.error())) {
        continue;
      }
      return std::unexpected(parent.error());
    }
    const UniqueFd fd(path.empty() ? ::openat(root_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                   : ::openat(parent->get(), std::string(parts.name).c_str(),
                                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
        continue;  // deleted by a whiteout, or replaced by a file or a symlink
      }
      return fail_errno(fmt::format("cannot open directory /{} of the image", path), errno);
    }
    const std::array<timespec, 2> times{meta.mtime, meta.mtime};
    if (::fchmod(fd.get(), meta.mode) != 0 || ::futimens(fd.get(), times.data()) != 0) {
      return fail_errno(fmt::format("cannot set the mode and time of directory /{}", path), errno);
    }
  }
  return ok();
}

}  // namespace dsec::image
