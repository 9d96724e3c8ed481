// A container image's layers applied, bottom first, onto a directory tree (OCI image-spec,
// layer.md): each layer's files, directories, symlinks, hard links and FIFOs with their
// modes, owners, times and extended attributes; its whiteouts: ".wh.NAME" deletes NAME of the
// layers below, ".wh..wh..opq" hides everything the layers below put in its directory. What
// a layer adds itself survives its own whiteouts, whatever their order in the archive.
//
// A layer is hostile input: every path is cleaned and resolved inside the tree (tree_path.h),
// so no "..", absolute path or symlink reaches outside it; hard links stay inside it too;
// device nodes and sockets are skipped and counted; sizes and entry counts are bounded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <stop_token>
#include <string>
#include <unordered_set>

#include "vmm/common/error.h"
#include "vmm/image/tar_stream.h"

struct archive_entry;

namespace dsec::image {

struct UnpackLimits {
  uint64_t max_file_bytes = uint64_t{16} << 30;   // one file
  uint64_t max_total_bytes = uint64_t{64} << 30;  // all files of all layers
  uint64_t max_entries = 4'000'000;               // all entries of all layers
};

struct LayerStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;  // file contents written
  uint64_t whiteouts = 0;
  uint64_t skipped_devices = 0;  // character and block devices, sockets
  uint64_t skipped_xattrs = 0;   // extended attributes this host or user could not set
};

class TreeBuilder {
 public:
  // `root_fd`: the tree's root directory, open (it must outlive the builder). `keep_owners`:
  // give entries the archive's uid and gid (needs root); else they stay the importer's, and
  // keep their owner's read permission (and search, for a directory) for mkfs.erofs.
  TreeBuilder(int root_fd, UnpackLimits limits, bool keep_owners);

  // Applies the next layer. `stop` is checked between entries and between blocks of data.
  Result<LayerStats> apply_layer(TarStream& layer, const std::stop_token& stop);

  // After the last layer: every directory gets its mode and time (deepest first, so that
  // read-only directories are set last).
  Status finish();

  // The newest modification time of any entry (seconds since the epoch; 0 if none).
  int64_t newest_mtime() const { return newest_mtime_; }

 private:
  struct DirMeta {
    mode_t mode = 0755;
    timespec mtime{};
  };
  struct Layer;  // one layer's progress
  struct Node;   // an entry and where it goes

  mode_t mode_of(archive_entry* entry) const;
  Status apply_entry(Layer& layer, archive_entry* entry, const std::stop_token& stop);
  Status clear_the_way(const Node& node, bool is_directory);
  Status make_hard_link(Layer& layer, const Node& node, const char* raw_target);
  Status make_directory(Layer& layer, const Node& node);
  Status write_file(Layer& layer, const Node& node, const std::stop_token& stop);
  Status set_metadata(Layer& layer, int fd, const Node& node);
  Status set_metadata_at(Layer& layer, const Node& node, bool with_mode);
  Status apply_whiteout(Layer& layer, std::string_view dir, std::string_view name);
  Status remove_from_lower(Layer& layer, const std::string& path);

  int root_fd_;
  UnpackLimits limits_;
  bool keep_owners_;
  uint64_t total_entries_ = 0;
  uint64_t total_bytes_ = 0;
  int64_t newest_mtime_ = 0;
  // Every directory's mode and time, set by finish(); keyed by clean path, so that the
  // reverse order puts a directory after everything in it.
  std::map<std::string, DirMeta> dirs_;
};

}  // namespace dsec::image
