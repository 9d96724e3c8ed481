#include "vmm/snapshot/memory_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>

#include "vmm/common/atomic_file.h"

namespace dsec::snapshot {

namespace {

constexpr uint64_t kPageSize = 4096;

bool is_zero_page(const uint8_t* page) {
  static constexpr std::array<uint8_t, kPageSize> kZeroPage{};
  return std::memcmp(page, kZeroPage.data(), kPageSize) == 0;
}

}  // namespace

Result<MemoryFileFigures> write_memory_file(const std::string& path, const GuestMemory& memory) {
  MemoryFileFigures figures{memory.total_size(), 0};
  AtomicFileWriter file = DSEC_TRY(AtomicFileWriter::create(path));
  // The whole size first, so that every page not written below is a hole reading as zero.
  if (::ftruncate(file.fd(), static_cast<off_t>(figures.ram_bytes)) != 0) {
    return fail_errno(
        fmt::format("cannot size the memory file {} to {} bytes", path, figures.ram_bytes), errno,
        "is there room on its file system?");
  }
  uint64_t file_offset = 0;
  for (const GuestRegion& region : memory.regions()) {
    const uint8_t* bytes = region.host();
    // GuestMemory's regions are whole 4 KiB pages.
    const uint64_t pages = region.size() / kPageSize;
    // Each run of non-zero pages is one write; the page after the last ends the last run.
    std::optional<uint64_t> run_start;
    for (uint64_t page = 0; page <= pages; ++page) {
      const bool has_data = page < pages && !is_zero_page(bytes + page * kPageSize);
      if (has_data && !run_start) {
        run_start = page;
      } else if (!has_data && run_start) {
        const std::span<const uint8_t> run(bytes + *run_start * kPageSize,
                                           (page - *run_start) * kPageSize);
        DSEC_TRY(file.write_at(file_offset + *run_start * kPageSize, run));
        figures.written_bytes += run.size();
        run_start.reset();
      }
    }
    file_offset += region.size();
  }
  DSEC_TRY(file.commit());
  return figures;
}

Status check_memory_file(int fd, uint64_t expected_total) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return fail_errno("fstat of the snapshot's memory file", errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail("the snapshot's memory file is not a regular file",
                "give the memory file written with the snapshot");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size != expected_total) {
    return fail(fmt::format("the snapshot's memory file is {} bytes, but its state file gives the "
                            "guest {} bytes of RAM ({})",
                            size, expected_total,
                            size < expected_total ? "the memory file is truncated"
                                                  : "the memory file is from another snapshot"),
                "give the memory file written with this state file, or take the snapshot again");
  }
  return ok();
}

Result<UniqueFd> open_memory_file(const std::string& path, uint64_t expected_total) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return fail_errno("cannot open the snapshot's memory file " + path, errno);
  }
  if (auto checked = check_memory_file(fd.get(), expected_total); !checked) {
    return std::unexpected(checked.error().with_context(path));
  }
  return fd;
}

}  // namespace dsec::snapshot
