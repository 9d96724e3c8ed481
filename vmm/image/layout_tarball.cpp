#include "vmm/image/layout_tarball.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>

#include "vmm/common/unique_fd.h"
#include "vmm/image/oci_json.h"
#include "vmm/image/tar_stream.h"
#include "vmm/image/tree_path.h"

namespace dsec::image {
namespace {

constexpr std::string_view kBlobDir = "blobs/sha256/";

// Whether a clean path of the archive is one of the layout's files that dsec-vmm reads.
bool is_layout_file(const std::string& path) {
  // manifest.json only tells `docker save`'s older format apart (oci_layout.cpp).
  if (path == "oci-layout" || path == "index.json" || path == "manifest.json") {
    return true;
  }
  return path.starts_with(kBlobDir) &&
         oci::check_digest("sha256:" + path.substr(kBlobDir.size()), path).has_value();
}

Status make_blob_dirs(int dir_fd) {
  for (const char* dir : {"blobs", "blobs/sha256"}) {
    if (::mkdirat(dir_fd, dir, 0700) != 0 && errno != EEXIST) {
      return fail_errno(std::string("cannot create ") + dir + " in the working directory", errno);
    }
  }
  return ok();
}

}  // namespace

Status unpack_layout_tarball(const std::filesystem::path& tarball, int dir_fd, uint64_t max_bytes,
                             const std::stop_token& stop) {
  const UniqueFd file(::open(tarball.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) {
    return fail_errno("cannot open " + tarball.string(), errno);
  }
  TarStream stream = DSEC_TRY(TarStream::from_fd(file.get(), tarball.string()));
  DSEC_TRY(make_blob_dirs(dir_fd));
  uint64_t total = 0;
  while (true) {
    archive_entry* entry = nullptr;
    const int rc = archive_read_next_header(stream.get(), &entry);
    if (rc == ARCHIVE_EOF) {
      return ok();
    }
    if (rc == ARCHIVE_RETRY) {
      continue;
    }
    if (rc < ARCHIVE_WARN) {
      return std::unexpected(stream.error("reading"));
    }
    const char* raw = archive_entry_pathname(entry);
    if (raw == nullptr || archive_entry_filetype(entry) != AE_IFREG ||
        archive_entry_hardlink(entry) != nullptr) {
      continue;
    }
    const auto path = clean_tree_path(raw, "");
    if (!path || !is_layout_file(*path)) {
      continue;
    }
    const auto size = static_cast<uint64_t>(std::max<int64_t>(archive_entry_size(entry), 0));
    if (size > max_bytes - total) {
      return fail(
          fmt::format("{}: its layout files hold more than {} bytes", tarball.string(), max_bytes));
    }
    total += size;
    // Our own directory, holding only regular files: O_NOFOLLOW for good measure.
    const UniqueFd out(::openat(dir_fd, path->c_str(),
                                O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) {
      return fail_errno("cannot create " + *path + " in the working directory", errno);
    }
    DSEC_TRY(stream.write_entry_data(out.get(), size, *path, stop));
  }
}

}  // namespace dsec::image
