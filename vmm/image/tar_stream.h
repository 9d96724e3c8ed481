// A tar archive read through libarchive, plain or compressed with gzip or zstd (told from
// its first bytes): from memory, from an open file, or from a layout's blob (so that the
// blob's size and digest are checked as the archive is read, oci_blob.h).
#pragma once

#include <archive.h>

#include <cstdint>
#include <memory>
#include <span>
#include <stop_token>
#include <string>

#include "vmm/common/error.h"
#include "vmm/image/oci_blob.h"

namespace dsec::image {

class TarStream {
 public:
  // `what` names the archive in messages. The bytes, file or blob must outlive the stream.
  static Result<TarStream> from_memory(std::span<const uint8_t> bytes, std::string what);
  static Result<TarStream> from_fd(int fd, std::string what);
  static Result<TarStream> from_blob(oci::BlobReader& blob);

  TarStream(TarStream&&) noexcept;
  TarStream& operator=(TarStream&&) = delete;
  TarStream(const TarStream&) = delete;
  TarStream& operator=(const TarStream&) = delete;
  ~TarStream();

  archive* get() const;
  const std::string& what() const;
  // Writes the data of the entry just read into `fd` at its offsets (a sparse entry leaves
  // holes), then sizes the file to `size`, the entry's declared size, beyond which no block
  // may reach. `path` names the entry in messages; `stop` is checked between blocks.
  Status write_entry_data(int fd, uint64_t size, const std::string& path,
                          const std::stop_token& stop);
  // Why the last libarchive call failed: the blob's own error if reading it failed, else
  // libarchive's message, prefixed with `doing`.
  Error error(const std::string& doing) const;

  struct State;  // libarchive's reader and what its read callback needs (tar_stream.cpp)

 private:
  explicit TarStream(std::unique_ptr<State> state);
  static Result<TarStream> open(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

}  // namespace dsec::image
