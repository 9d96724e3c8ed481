// Paths that an archive names, cleaned (refused when they point outside the tree) and
// resolved inside the tree being built as the guest will resolve them once the tree is its
// root: openat2 with RESOLVE_IN_ROOT keeps every "..", absolute symlink and relative symlink
// inside it, so no entry of a hostile archive can reach a file outside the tree.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::image {

// "./usr//bin/" -> "usr/bin"; "" for the tree's root ("./"). Fails for an absolute path,
// a ".." component or a NUL-free but empty name; `what` names the entry in the message.
Result<std::string> clean_tree_path(std::string_view raw, const std::string& what);

// A clean path's directory and last component: "usr/bin/ls" -> {"usr/bin", "ls"},
// "etc" -> {"", "etc"}.
struct TreePathParts {
  std::string_view dir;
  std::string_view name;
};
TreePathParts split_tree_path(std::string_view clean);

// "dir/name", or "name" when dir is the root ("").
std::string join_tree_path(std::string_view dir, std::string_view name);

// Opens the directory `clean` of the tree whose root is `root_fd` (O_PATH), resolving it
// inside the tree. With `created`, missing directories are made (mode 0700: the caller sets
// their real modes later) and their clean paths appended to it; without, a missing one fails.
Result<UniqueFd> open_tree_dir(int root_fd, std::string_view clean,
                               std::vector<std::string>* created);

}  // namespace dsec::image
