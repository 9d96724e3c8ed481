// A directory of dsec-vmm's own for the files an image import makes: created empty and
// private (mode 0700), and removed with everything in it when it goes, so that a failed or
// interrupted import leaves nothing behind.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::image {

class PrivateDir {
 public:
  // Creates `parent`/`prefix`.XXXXXX.
  static Result<PrivateDir> create(const std::filesystem::path& parent, std::string_view prefix);

  PrivateDir(PrivateDir&& other) noexcept;
  PrivateDir& operator=(PrivateDir&&) = delete;
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  ~PrivateDir();

  const std::filesystem::path& path() const { return path_; }
  int fd() const { return fd_.get(); }

 private:
  PrivateDir(std::filesystem::path path, UniqueFd fd)
      : path_(std::move(path)), fd_(std::move(fd)) {}

  std::filesystem::path path_;  // empty once moved from
  UniqueFd fd_;
};

// Removes `name` in the directory `dir_fd` and, if it is a directory, everything under it,
// however deep, holding two descriptors at a time. Never follows a symlink. A directory it
// may not read or change (a tree unpacked as another user keeps the archive's modes) is made
// writable first. A `name` that does not exist is not an error.
Status remove_tree_at(int dir_fd, const std::string& name);

}  // namespace dsec::image
