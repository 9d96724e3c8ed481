#include "vmm/common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>
#include <vector>

namespace dsec {

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    return ".";
  }
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Result<AtomicFileWriter> AtomicFileWriter::create(std::string path) {
  if (path.empty() || path.back() == '/') {
    return fail(fmt::format("cannot write \"{}\": not a file path", path));
  }
  std::string temp = path + ".tmp.XXXXXX";
  std::vector<char> name(temp.begin(), temp.end());
  name.push_back('\0');
  UniqueFd fd(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd) {
    return fail_errno(
        fmt::format("cannot create a temporary file in {} to write {}", directory_of(path), path),
        errno, "check that the directory exists and is writable");
  }
  temp.assign(name.data());
  return AtomicFileWriter(std::move(path), std::move(temp), std::move(fd));
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::exchange(other.temp_path_, {})),
      fd_(std::move(other.fd_)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (!temp_path_.empty()) {
    ::unlink(temp_path_.c_str());
  }
}

Status AtomicFileWriter::write_at(uint64_t offset, std::span<const uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(fd_.get(), data.data() + done, data.size() - done,
                               static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail_errno("cannot write " + temp_path_, errno, "is the disk full?");
    }
    if (n == 0) {
      return fail("cannot write " + temp_path_ + ": the write stored nothing", "is the disk full?");
    }
    done += static_cast<size_t>(n);
  }
  return ok();
}

Status AtomicFileWriter::set_mode(mode_t mode) {
  if (::fchmod(fd_.get(), mode) != 0) {
    return fail_errno(fmt::format("cannot set mode {:04o} on {}", mode, temp_path_), errno);
  }
  return ok();
}

Status AtomicFileWriter::commit() {
  if (temp_path_.empty()) {
    return fail("writing " + path_ + ": already committed");
  }
  if (::fsync(fd_.get()) != 0) {
    return fail_errno("fsync of " + temp_path_, errno, "is the disk full or failing?");
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return fail_errno(fmt::format("cannot rename {} to {}", temp_path_, path_), errno);
  }
  temp_path_.clear();
  const std::string directory = directory_of(path_);
  const UniqueFd dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir || ::fsync(dir.get()) != 0) {
    return fail_errno("fsync of directory " + directory + " (after writing " + path_ + ")", errno,
                      "the file is complete but may not survive a power cut");
  }
  return ok();
}

}  // namespace dsec
