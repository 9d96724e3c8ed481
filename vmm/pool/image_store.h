// The pool daemon's image store (`dsec-vmm pool --image-dir DIR`, docs/pool.md): a directory
// of the daemon's own in which warm image NAME is DIR/NAME/{state,memory}. Images are named,
// never given as paths. Every file of the store is opened through a descriptor of its
// directory, never following a symbolic link, and checked on the open descriptor: owned by
// the daemon's effective uid, a regular file (or directory), and writable by neither group
// nor others. A snapshot of a sandbox goes into a staging directory made in the store
// (mkdirat, 0700) and is renamed to DIR/NAME only once whole, so that no partial image is
// ever seen under a name. Everything here runs on the pool's loop thread, but for the
// descriptors a snapshot's background task writes through.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/pool/pool_error.h"

namespace dsec::pool {

// What the store may hold; a snapshot that would pass either is refused (kFull).
struct ImageStoreLimits {
  uint64_t max_bytes = uint64_t{64} << 30;  // the images' files' sizes together
  uint32_t max_images = 256;
};

// An image's name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}, without "..". It is one directory's name
// in the store, so never a path.
Status check_image_name(std::string_view name);

// An image's two files, open and checked; `memory_bytes` is the memory file's size (the
// guest's RAM).
struct ImageFiles {
  UniqueFd state;
  UniqueFd memory;
  uint64_t memory_bytes = 0;
};

// How much the store holds: its images and their files' sizes (holes counted).
struct ImageStoreUsage {
  uint64_t bytes = 0;
  uint32_t images = 0;
};

class ImageStore;

// A snapshot being written into the store: a staging directory DIR/.staging-XXXXXXXX, which
// commit() renames to DIR/NAME. Removed with the files written into it unless committed.
class StagedImage {
 public:
  StagedImage(StagedImage&&) noexcept;
  StagedImage& operator=(StagedImage&&) = delete;
  StagedImage(const StagedImage&) = delete;
  StagedImage& operator=(const StagedImage&) = delete;
  ~StagedImage();

  // The staging directory: write `state` and `memory` into it with openat(O_CREAT | O_EXCL |
  // O_NOFOLLOW), mode 0600.
  int dir_fd() const { return dir_.get(); }
  const std::string& name() const { return name_; }
  // Renames the staging directory to DIR/NAME: kConflict when NAME appeared meanwhile, kFull
  // when the files written would take the store past its max_bytes, kInvalid when they are
  // not a snapshot's two regular files.
  PoolResult<void> commit();

 private:
  friend class ImageStore;
  struct InFlight;
  StagedImage(std::shared_ptr<InFlight> in_flight, int store_fd, std::string name,
              std::string staging_name, UniqueFd dir, uint64_t reserved_bytes,
              ImageStoreLimits limits, std::string store_path);
  void discard();

  std::shared_ptr<InFlight> in_flight_;
  int store_fd_ = -1;
  std::string name_;
  std::string staging_name_;  // empty once committed or moved from
  UniqueFd dir_;
  uint64_t reserved_bytes_ = 0;
  ImageStoreLimits limits_;
  std::string store_path_;
};

class ImageStore {
 public:
  // Opens `dir`, made 0700 when missing (its parent must exist). Refused when it is a
  // symbolic link, not a directory, not owned by the daemon's effective uid, or writable by
  // group or others. Staging directories a daemon that died left are removed.
  static Result<ImageStore> open(const std::string& dir, ImageStoreLimits limits);

  const std::string& path() const { return path_; }
  const ImageStoreLimits& limits() const { return limits_; }

  // Image `name`'s files, checked as the header says.
  Result<ImageFiles> open_image(std::string_view name) const;

  // The images of the store and their sizes (staging directories not counted).
  Result<ImageStoreUsage> usage() const;

  // A staging directory for a snapshot to be named `name` that may take `expected_bytes`:
  // kInvalid for a bad name, kConflict when the image exists or a snapshot of that name is
  // being written, kFull when the store's limits leave no room.
  PoolResult<StagedImage> stage(std::string_view name, uint64_t expected_bytes);

 private:
  ImageStore(std::string path, UniqueFd fd, ImageStoreLimits limits);
  void remove_stale_staging() const;

  std::string path_;
  UniqueFd fd_;
  ImageStoreLimits limits_;
  std::shared_ptr<StagedImage::InFlight> in_flight_;
};

}  // namespace dsec::pool
