// Reading whole files (kernels, initrds) with errors that name the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec {

// An open regular file, its size and its permission bits.
struct OpenFile {
  UniqueFd fd;
  uint64_t size = 0;
  uint32_t mode = 0;  // st_mode & 07777
};

// The path by which a process reopens what its descriptor `fd` holds: the kernel resolves it
// to that very file, whatever its name now is, without looking a name up.
inline std::string fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

// Opens `path` read-only; fails if it is not a regular file.
Result<OpenFile> open_regular_file(const std::string& path);
// Reads out.size() bytes from `fd` starting at `offset`; fails on a short read.
Status read_exact(int fd, uint64_t offset, std::span<uint8_t> out, const std::string& path);
// A whole file mapped read-only (MAP_PRIVATE): pages are read from the page cache only
// when touched, so a loader that needs a few headers and some segments of a large file
// (an ELF vmlinux with its symbol table) reads no more than that, with no copy in between.
// The file must not be truncated while it is mapped (that would fault the reader).
class MappedFile {
 public:
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // The open file, for mapping parts of it elsewhere (GuestMemory::map_file_pages).
  int fd() const { return fd_.get(); }

 private:
  friend Result<MappedFile> map_file(const std::string& path, uint64_t max_size);
  MappedFile(UniqueFd fd, const uint8_t* data, uint64_t size)
      : fd_(std::move(fd)), data_(data), size_(size) {}
  void unmap();

  UniqueFd fd_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Maps the whole file; fails if it is empty or larger than `max_size` bytes.
Result<MappedFile> map_file(const std::string& path, uint64_t max_size);

}  // namespace dsec
