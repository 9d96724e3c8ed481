#include "vmm/common/file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

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
  return OpenFile{std::move(fd), static_cast<uint64_t>(st.st_size)};
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

Result<std::vector<uint8_t>> read_file(const std::string& path, uint64_t max_size) {
  OpenFile file = DSEC_TRY(open_regular_file(path));
  if (file.size > max_size) {
    return fail(fmt::format("{} is {} MiB, more than the {} MiB allowed", path, file.size >> 20,
                            max_size >> 20));
  }
  std::vector<uint8_t> bytes(file.size);
  DSEC_TRY(read_exact(file.fd.get(), 0, bytes, path));
  return bytes;
}

}  // namespace dsec
