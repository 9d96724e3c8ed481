// Writing a file so that a reader finds either the previous file or the whole new one, never
// a half-written file, even after a crash or a power cut: the bytes go to a temporary file in
// the same directory, which is synced and then renamed over the path. Snapshot files are
// written so, and files copied out of a guest (`dsec-vmm cp`).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec {

class AtomicFileWriter {
 public:
  // Creates the temporary file `path`.tmp.XXXXXX (mode 0600 until set_mode(): a snapshot
  // holds the guest's memory) in the directory of `path`, so that the rename stays within
  // one file system.
  static Result<AtomicFileWriter> create(std::string path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Removes the temporary file unless commit() succeeded: a failed write leaves nothing.
  ~AtomicFileWriter();

  // The temporary file, for ftruncate and the like.
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

  // Writes all of `data` at `offset`, retrying short writes.
  Status write_at(uint64_t offset, std::span<const uint8_t> data);
  // The permission bits the file gets (fchmod of the temporary file).
  Status set_mode(mode_t mode);
  // fsync of the file, rename over the path, fsync of the directory (which makes the
  // rename itself durable).
  Status commit();

 private:
  AtomicFileWriter(std::string path, std::string temp_path, UniqueFd fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(std::move(fd)) {}

  std::string path_;
  std::string temp_path_;  // empty once renamed (or moved from)
  UniqueFd fd_;
};

}  // namespace dsec
