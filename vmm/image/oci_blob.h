// The blobs of an OCI image layout (blobs/sha256/<hex>), read so that every byte is checked:
// a blob's size against its descriptor when it is opened, its sha256 digest once it has been
// read to its end. A layout is input from outside: a blob may be missing, short, or other
// bytes than its digest says.
#pragma once

#include <nettle/sha2.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/image/oci_json.h"

namespace dsec::image::oci {

// sha256 of `bytes`, as 64 lowercase hex digits.
std::string sha256_hex(std::span<const uint8_t> bytes);

class BlobReader {
 public:
  // Opens the blob of `descriptor` in the layout directory `layout`; `what` names it in
  // messages ("layer 2 of 3"). Fails if it is missing, not a regular file, or not the size
  // its descriptor says.
  static Result<BlobReader> open(const std::filesystem::path& layout, const Descriptor& descriptor,
                                 std::string what);

  // Reads up to out.size() bytes; 0 at the end of the blob.
  Result<size_t> read(std::span<uint8_t> out);
  // Reads what is left of the blob, then fails unless it was as long as its descriptor says
  // and hashes to its digest.
  Status finish();

  const Descriptor& descriptor() const { return descriptor_; }
  const std::string& what() const { return what_; }

 private:
  BlobReader(UniqueFd fd, Descriptor descriptor, std::string what, std::filesystem::path path);
  Status corrupt(const std::string& how) const;

  UniqueFd fd_;
  Descriptor descriptor_;
  std::string what_;
  std::filesystem::path path_;
  sha256_ctx hash_{};
  uint64_t bytes_read_ = 0;
};

// A whole small blob (a JSON document), verified; fails if its descriptor says it is larger
// than `max_bytes`.
Result<std::string> read_small_blob(const std::filesystem::path& layout,
                                    const Descriptor& descriptor, const std::string& what,
                                    uint64_t max_bytes);

}  // namespace dsec::image::oci
