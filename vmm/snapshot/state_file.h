// A snapshot's state file: named sections of bytes ("vm", "vcpu.0", "device.virtio-blk.0"),
// each encoded with ByteWriter, in one checksummed container. docs/snapshot-format.md
// describes the layout byte by byte.
//
// The loader trusts nothing in the file: before any section is handed out it has checked
// the size cap, the magic, the format version, the header and table checksum, that every
// section lies inside the file without overlapping another, that names are well formed and
// unique, and every section's own checksum, so that a corrupt section is named.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::snapshot {

inline constexpr uint32_t kStateFileFormatVersion = 1;
// A state file holds device, vCPU and VM state, never guest memory: a few hundred KiB at
// most. The cap keeps a hostile or mistaken file (a memory file given as the state) from
// making the loader read gigabytes.
inline constexpr uint64_t kStateFileMaxSize = 16 << 20;
inline constexpr uint32_t kStateFileMaxSections = 4096;
// A name is stored in 32 bytes, NUL-terminated.
inline constexpr size_t kSectionNameMaxLength = 31;

// Collects sections and writes the file.
class StateFileWriter {
 public:
  // Names are 1 to 31 characters of [A-Za-z0-9._-]; a name already added is refused.
  Status add(std::string_view name, std::vector<uint8_t> payload);
  // The whole file's bytes; fails if it would exceed kStateFileMaxSize.
  Result<std::vector<uint8_t>> encode() const;
  // Writes the file atomically: a reader sees the previous file at `path` or this one.
  Status write(const std::string& path) const;

 private:
  struct Section {
    std::string name;
    std::vector<uint8_t> payload;
  };
  std::vector<Section> sections_;
};

// A state file that passed every check.
class StateFile {
 public:
  // Reads and checks the file at `path`; errors name the path.
  static Result<StateFile> load(const std::string& path);
  // Checks `bytes` as a state file (copied: the result does not refer to them).
  // `source` begins every error message, e.g. "snapshot state file /x/state".
  static Result<StateFile> parse(std::span<const uint8_t> bytes,
                                 std::string_view source = "snapshot state file");

  bool has_section(std::string_view name) const;
  // The payload of section `name`, or an error naming the section that is missing.
  Result<std::span<const uint8_t>> section(std::string_view name) const;
  // Every section's name, in file order.
  std::vector<std::string> section_names() const;

 private:
  struct Section {
    std::string name;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  StateFile(std::string source, std::vector<uint8_t> bytes, std::vector<Section> sections)
      : source_(std::move(source)), bytes_(std::move(bytes)), sections_(std::move(sections)) {}
  static Result<StateFile> parse_owned(std::vector<uint8_t> bytes, std::string source);
  const Section* find(std::string_view name) const;

  std::string source_;
  std::vector<uint8_t> bytes_;
  std::vector<Section> sections_;
};

}  // namespace dsec::snapshot
