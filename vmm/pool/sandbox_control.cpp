#include "vmm/pool/sandbox_control.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "vmm/api/vm_control.h"
#include "vmm/common/unique_fd.h"
#include "vmm/http/client.h"
#include "vmm/pool/sandbox_dir.h"
#include "vmm/snapshot/snapshot_dir.h"

namespace dsec::pool {
namespace {

http::HttpClient client(const std::string& api_socket) {
  return {api_socket, kSandboxApiTimeout,
          http::HttpServerKind{.socket = "sandbox API socket",
                               .name = "sandbox's VMM",
                               .start_hint = "the sandbox's VMM has no API socket: it was started "
                                             "by an older daemon; release it and acquire another"}};
}

// A directory in a sandbox's directory (a jailed one's jail) that its VMM writes a snapshot
// into, removed with what is in it.
class StagingDir {
 public:
  static Result<StagingDir> make(const std::string& sandbox_dir) {
    std::string path = sandbox_dir + "/snapshot-XXXXXX";
    if (::mkdtemp(path.data()) == nullptr) {
      return fail_errno("cannot make a snapshot directory in " + sandbox_dir, errno);
    }
    StagingDir staging(path);
    if (const auto owner = sandbox_dir_owner(sandbox_dir)) {
      DSEC_TRY(give_sandbox_dir(path, *owner));
    }
    return staging;
  }
  StagingDir(StagingDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  StagingDir& operator=(StagingDir&&) = delete;
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  ~StagingDir() {
    if (!path_.empty()) {
      remove_sandbox_dir(path_);
    }
  }
  const std::string& path() const { return path_; }
  // Its path as the jailed VMM sees it: rooted at the jail.
  std::string in_jail() const { return "/" + std::filesystem::path(path_).filename().string(); }

 private:
  explicit StagingDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Copies the regular file `name` of the directory `from` (a descriptor: the jailed VMM owns
// the directory and may have swapped a link in for it since) into a new file `name` of the
// directory `to`, never through a link and never waiting on a FIFO, at most the size it had
// when opened.
Status copy_out(int from, const std::string& from_path, const char* name, int to) {
  const std::string source = from_path + "/" + name;
  UniqueFd in(::openat(from, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!in || ::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return fail("the VMM's snapshot has no regular file " + source);
  }
  const std::string target = std::string("the image store's ") + name;
  UniqueFd out(::openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) {
    return fail_errno("cannot create " + target, errno);
  }
  for (auto left = static_cast<size_t>(st.st_size); left > 0;) {
    const ssize_t n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr, left, 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return fail_errno(fmt::format("cannot copy {} to {}", source, target), errno,
                        "check the free space where the snapshot goes");
    }
    if (n == 0) {
      break;  // it shrank meanwhile: what is there
    }
    left -= static_cast<size_t>(n);
  }
  if (::fsync(out.get()) != 0) {
    return fail_errno("fsync " + target, errno);
  }
  return ok();
}

}  // namespace

Status set_sandbox_paused(const std::string& api_socket, bool paused) {
  return paused ? api::pause_vm(client(api_socket)) : api::resume_vm(client(api_socket));
}

Status snapshot_sandbox(const std::string& api_socket, const std::string& sandbox_dir, bool jailed,
                        bool paused, int target) {
  const auto staging = DSEC_TRY(StagingDir::make(sandbox_dir));
  // A sandbox its client paused stays paused; one that ran runs on.
  DSEC_TRY(api::create_snapshot_at(client(api_socket), jailed ? staging.in_jail() : staging.path(),
                                   /*resume=*/!paused));
  const UniqueFd written(
      ::open(staging.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!written) {
    return fail_errno("the VMM's snapshot directory " + staging.path(), errno);
  }
  DSEC_TRY(copy_out(written.get(), staging.path(), snapshot::kStateFileName, target));
  DSEC_TRY(copy_out(written.get(), staging.path(), snapshot::kMemoryFileName, target));
  if (::fsync(target) != 0) {
    return fail_errno("fsync of the image store's staging directory", errno);
  }
  return ok();
}

}  // namespace dsec::pool
