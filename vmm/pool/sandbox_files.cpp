#include "vmm/pool/sandbox_files.h"

#include <sys/mman.h>
#include <unistd.h>

#include "vmm/agent/client.h"
#include "vmm/common/unique_fd.h"

namespace dsec::pool {
namespace {

agent::AgentClient client_for(const std::string& vsock) {
  return agent::AgentClient([vsock] { return agent::connect_vsock_uds(vsock, agent::kAgentPort); });
}

}  // namespace

Status write_guest_file(const std::string& vsock, const std::string& guest_path,
                        const GuestFile& file) {
  // The agent client reads what it sends from a descriptor: the bytes go in a memfd.
  UniqueFd source(::memfd_create("dsec-pool-file", MFD_CLOEXEC));
  if (!source) {
    return fail_errno("memfd_create", errno);
  }
  size_t written = 0;
  while (written < file.bytes.size()) {
    const ssize_t n =
        ::write(source.get(), file.bytes.data() + written, file.bytes.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return fail_errno("write to a memfd", errno);
    }
    written += static_cast<size_t>(n);
  }
  if (::lseek(source.get(), 0, SEEK_SET) != 0) {
    return fail_errno("lseek on a memfd", errno);
  }
  return client_for(vsock).write_file(source.get(), file.bytes.size(), guest_path,
                                      file.mode & 0777);
}

Result<GuestFile> read_guest_file(const std::string& vsock, const std::string& guest_path) {
  GuestFile file;
  const auto fits = [&guest_path](const agent::FileInfo& info) -> Status {
    if (info.size > kMaxPoolFileBytes) {
      return fail(guest_path + " holds " + std::to_string(info.size) +
                      " bytes, more than the pool moves (" + std::to_string(kMaxPoolFileBytes) +
                      ")",
                  "copy it with dsec-vmm cp on the sandbox's vsock socket");
    }
    return ok();
  };
  const auto collect = [&file](std::span<const uint8_t> bytes) -> Status {
    if (file.bytes.size() + bytes.size() > kMaxPoolFileBytes) {
      return fail("the guest sent more than the pool moves");
    }
    file.bytes.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return ok();
  };
  const agent::FileInfo info = DSEC_TRY(client_for(vsock).read_file(guest_path, collect, fits));
  file.mode = info.mode & 0777;
  return file;
}

}  // namespace dsec::pool
