#include "vmm/image/oci_blob.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <utility>

namespace dsec::image::oci {
namespace {

constexpr const char* kCopyAgain =
    "the layout is incomplete or corrupt: copy or save the image again";

std::string hex_of(std::span<const uint8_t> bytes) {
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const uint8_t byte : bytes) {
    hex += fmt::format("{:02x}", byte);
  }
  return hex;
}

std::string digest_hex(sha256_ctx& hash) {
  std::array<uint8_t, SHA256_DIGEST_SIZE> digest{};
  sha256_digest(&hash, digest.size(), digest.data());
  return hex_of(digest);
}

}  // namespace

std::string sha256_hex(std::span<const uint8_t> bytes) {
  sha256_ctx hash{};
  sha256_init(&hash);
  sha256_update(&hash, bytes.size(), bytes.data());
  return digest_hex(hash);
}

BlobReader::BlobReader(UniqueFd fd, Descriptor descriptor, std::string what,
                       std::filesystem::path path)
    : fd_(std::move(fd)),
      descriptor_(std::move(descriptor)),
      what_(std::move(what)),
      path_(std::move(path)) {
  sha256_init(&hash_);
}

Result<BlobReader> BlobReader::open(const std::filesystem::path& layout,
                                    const Descriptor& descriptor, std::string what) {
  DSEC_TRY(check_digest(descriptor.digest, "the digest of " + what));
  // Messages name the blob by its path in the layout (which may be an unpacked tarball's).
  const std::filesystem::path path = std::filesystem::path("blobs/sha256") / descriptor.hex();
  const std::string name = fmt::format("blob {} ({})", descriptor.short_digest(), what);
  UniqueFd fd(::open((layout / path).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      return fail(fmt::format("{} is missing: the layout has no {}", name, path.string()),
                  kCopyAgain);
    }
    return fail_errno(fmt::format("cannot open {}: {}", name, path.string()), errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail_errno("fstat of " + path.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(fmt::format("{} is not a regular file: {}", name, path.string()), kCopyAgain);
  }
  if (static_cast<uint64_t>(st.st_size) != descriptor.size) {
    return fail(fmt::format("{} is {} bytes, but its descriptor says {}: {}", name, st.st_size,
                            descriptor.size, path.string()),
                kCopyAgain);
  }
  return BlobReader(std::move(fd), descriptor, std::move(what), path);
}

Status BlobReader::corrupt(const std::string& how) const {
  return fail(
      fmt::format("blob {} ({}) {}: {}", descriptor_.short_digest(), what_, how, path_.string()),
      kCopyAgain);
}

Result<size_t> BlobReader::read(std::span<uint8_t> out) {
  ssize_t n = 0;
  do {
    n = ::read(fd_.get(), out.data(), out.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return fail_errno(fmt::format("cannot read blob {} ({}): {}", descriptor_.short_digest(), what_,
                                  path_.string()),
                      errno);
  }
  bytes_read_ += static_cast<uint64_t>(n);
  if (bytes_read_ > descriptor_.size) {
    return std::unexpected(corrupt("grew while it was read").error());
  }
  sha256_update(&hash_, static_cast<size_t>(n), out.data());
  return static_cast<size_t>(n);
}

Status BlobReader::finish() {
  std::array<uint8_t, size_t{64} << 10> buffer{};
  while (DSEC_TRY(read(buffer)) > 0) {
  }
  if (bytes_read_ != descriptor_.size) {
    return corrupt(fmt::format("ended after {} of its {} bytes", bytes_read_, descriptor_.size));
  }
  const std::string actual = digest_hex(hash_);
  if (actual != descriptor_.hex()) {
    return corrupt(fmt::format("does not match its digest (its bytes hash to sha256:{})", actual));
  }
  return ok();
}

Result<std::string> read_small_blob(const std::filesystem::path& layout,
                                    const Descriptor& descriptor, const std::string& what,
                                    uint64_t max_bytes) {
  if (descriptor.size > max_bytes) {
    return fail(fmt::format("{} is {} bytes by its descriptor; dsec-vmm reads at most {}", what,
                            descriptor.size, max_bytes));
  }
  BlobReader reader = DSEC_TRY(BlobReader::open(layout, descriptor, what));
  std::string text(descriptor.size, '\0');
  size_t filled = 0;
  while (filled < text.size()) {
    const size_t n = DSEC_TRY(reader.read(
        std::span(reinterpret_cast<uint8_t*>(text.data()) + filled, text.size() - filled)));
    if (n == 0) {
      break;
    }
    filled += n;
  }
  DSEC_TRY(reader.finish());
  return text;
}

}  // namespace dsec::image::oci
