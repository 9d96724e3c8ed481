#include "vmm/image/tar_stream.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <optional>
#include <utility>

namespace dsec::image {

namespace {
constexpr size_t kReadBlock = size_t{128} << 10;
}  // namespace

struct TarStream::State {
  struct ArchiveFree {
    void operator()(archive* a) const { archive_read_free(a); }
  };
  std::unique_ptr<archive, ArchiveFree> reader{archive_read_new()};
  std::string what;
  oci::BlobReader* blob = nullptr;
  std::optional<Error> blob_error;
  std::array<uint8_t, kReadBlock> buffer{};
};

namespace {

la_ssize_t read_blob(archive* a, void* client, const void** buffer) {
  auto* state = static_cast<TarStream::State*>(client);
  auto n = state->blob->read(state->buffer);
  if (!n) {
    state->blob_error = n.error();
    archive_set_error(a, EIO, "%s", n.error().message().c_str());
    return -1;
  }
  *buffer = state->buffer.data();
  return static_cast<la_ssize_t>(*n);
}

Status write_all(int fd, const uint8_t* data, size_t size, int64_t offset,
                 const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, offset);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return fail_errno("cannot write " + path, n < 0 ? errno : ENOSPC, "is the disk full?");
    }
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return ok();
}

}  // namespace

Result<TarStream> TarStream::open(std::unique_ptr<State> state) {
  archive* a = state->reader.get();
  if (a == nullptr) {
    return fail("libarchive could not allocate a reader for " + state->what);
  }
  // tar in its forms (ustar, pax, GNU), an empty file as an empty archive; gzip and zstd.
  if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
      archive_read_support_format_empty(a) != ARCHIVE_OK ||
      archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
      archive_read_support_filter_zstd(a) != ARCHIVE_OK) {
    return fail(fmt::format("libarchive cannot read {}: {}", state->what,
                            archive_error_string(a) ? archive_error_string(a) : "no tar support"));
  }
  return TarStream(std::move(state));
}

Result<TarStream> TarStream::from_memory(std::span<const uint8_t> bytes, std::string what) {
  auto state = std::make_unique<State>();
  state->what = std::move(what);
  TarStream stream = DSEC_TRY(open(std::move(state)));
  if (archive_read_open_memory(stream.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) {
    return std::unexpected(stream.error("opening"));
  }
  return stream;
}

Result<TarStream> TarStream::from_fd(int fd, std::string what) {
  auto state = std::make_unique<State>();
  state->what = std::move(what);
  TarStream stream = DSEC_TRY(open(std::move(state)));
  if (archive_read_open_fd(stream.get(), fd, kReadBlock) != ARCHIVE_OK) {
    return std::unexpected(stream.error("opening"));
  }
  return stream;
}

Result<TarStream> TarStream::from_blob(oci::BlobReader& blob) {
  auto state = std::make_unique<State>();
  state->what = blob.what();
  state->blob = &blob;
  State* client = state.get();
  TarStream stream = DSEC_TRY(open(std::move(state)));
  if (archive_read_open(stream.get(), client, nullptr, read_blob, nullptr) != ARCHIVE_OK) {
    return std::unexpected(stream.error("opening"));
  }
  return stream;
}

TarStream::TarStream(std::unique_ptr<State> state) : state_(std::move(state)) {}
TarStream::TarStream(TarStream&&) noexcept = default;
TarStream::~TarStream() = default;

archive* TarStream::get() const {
  return state_->reader.get();
}

const std::string& TarStream::what() const {
  return state_->what;
}

Status TarStream::write_entry_data(int fd, uint64_t size, const std::string& path,
                                   const std::stop_token& stop) {
  while (true) {
    if (stop.stop_requested()) {
      return fail("interrupted");
    }
    const void* block = nullptr;
    size_t length = 0;
    la_int64_t offset = 0;
    const int rc = archive_read_data_block(get(), &block, &length, &offset);
    if (rc == ARCHIVE_EOF) {
      break;
    }
    if (rc < ARCHIVE_WARN) {
      return std::unexpected(error("reading " + path + " from"));
    }
    // libarchive keeps blocks within the entry's declared size; checked here all the same.
    if (offset < 0 || static_cast<uint64_t>(offset) + length > size) {
      return fail(fmt::format("{}: {} has data beyond its declared size", what(), path));
    }
    DSEC_TRY(write_all(fd, static_cast<const uint8_t*>(block), length, offset, path));
  }
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return fail_errno("cannot size " + path, errno);
  }
  return ok();
}

Error TarStream::error(const std::string& doing) const {
  if (const std::optional<Error>& blob_error = state_->blob_error; blob_error.has_value()) {
    return blob_error.value();
  }
  const char* message = archive_error_string(state_->reader.get());
  return Error(fmt::format("{} {}: {}", doing, state_->what,
                           message ? message : "libarchive gave no reason"),
               0, "is it a tar archive (plain, gzip or zstd)?");
}

}  // namespace dsec::image
