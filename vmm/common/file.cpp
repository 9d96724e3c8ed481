#include "vmm/common/file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace dsec {

Result<OpenFile> open_regular_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return fail_errno("cannot open " + path, errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail_errno("cannot stat " + path, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(path + " is not a regular file");
  }
  return OpenFile{std::move(fd), static_cast<uint64_t>(st.st_size), st.st_mode & 07777U};
}

Status read_exact(int fd, uint64_t offset, std::span<uint8_t> out, const std::string& path) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail_errno("cannot read " + path, errno);
    }
    if (n == 0) {
      return fail(fmt::format("{}: file ended after {} of {} bytes", path, done, out.size()),
                  "was it changed while being read?");
    }
    done += static_cast<size_t>(n);
  }
  return ok();
}

Result<MappedFile> map_file(const std::string& path, uint64_t max_size) {
  OpenFile file = DSEC_TRY(open_regular_file(path));
  if (file.size == 0) {
    return fail(path + " is empty");
  }
  if (file.size > max_size) {
    return fail(fmt::format("{} is {} MiB, more than the {} MiB allowed", path, file.size >> 20,
                            max_size >> 20));
  }
  void* data = ::mmap(nullptr, file.size, PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
  if (data == MAP_FAILED) {
    return fail_errno("cannot map " + path, errno);
  }
  return MappedFile(std::move(file.fd), static_cast<const uint8_t*>(data), file.size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  unmap();
}

void MappedFile::unmap() {
  if (data_ != nullptr) {
    ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
  }
}

}  // namespace dsec
