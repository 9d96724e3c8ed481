#include "vmm/agent/file_copy.h"

#include <fmt/format.h>
#include <sys/statvfs.h>

#include <cerrno>

#include "vmm/common/atomic_file.h"

namespace dsec::agent {

mode_t host_file_mode(uint32_t guest_mode, mode_t umask) {
  return static_cast<mode_t>(guest_mode) & 0777 & ~umask;
}

Result<FileInfo> copy_out_of_guest(AgentClient& client, const std::string& guest_path,
                                   const std::string& host_path, mode_t umask) {
  AtomicFileWriter file = DSEC_TRY(AtomicFileWriter::create(host_path));
  const auto fits = [&](const FileInfo& info) -> Status {
    struct statvfs fs {};
    if (::fstatvfs(file.fd(), &fs) != 0) {
      return fail_errno("statvfs of the file system of " + host_path, errno);
    }
    const auto free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (info.size > free_bytes) {
      return fail(fmt::format("copying {} out of the guest: it is {} bytes, and the file system "
                              "of {} has {} free",
                              guest_path, info.size, host_path, free_bytes),
                  "free some space, or copy it elsewhere");
    }
    return ok();
  };
  uint64_t offset = 0;
  const auto to_file = [&](std::span<const uint8_t> bytes) -> Status {
    DSEC_TRY(file.write_at(offset, bytes));
    offset += bytes.size();
    return ok();
  };
  const FileInfo info = DSEC_TRY(client.read_file(guest_path, to_file, fits));
  DSEC_TRY(file.set_mode(host_file_mode(info.mode, umask)));
  DSEC_TRY(file.commit());
  return info;
}

}  // namespace dsec::agent
