#include "vmm/snapshot/state_file.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "vmm/common/atomic_file.h"
#include "vmm/common/file.h"
#include "vmm/snapshot/byte_codec.h"

namespace dsec::snapshot {

namespace {

// The layout, byte by byte (docs/snapshot-format.md).
using Magic = std::array<char, 8>;
constexpr Magic kMagic{'D', 'S', 'E', 'C', 'S', 'N', 'A', 'P'};
constexpr uint64_t kHeaderSize = 32;  // magic, version, section count, file size, checksum
constexpr uint64_t kChecksumOffset = 24;
constexpr uint64_t kEntrySize = 56;  // name[32], offset, size, checksum
constexpr size_t kNameField = kSectionNameMaxLength + 1;

constexpr const char* kDamaged = "the state file is damaged: take the snapshot again";

using NameField = std::array<char, kNameField>;

uint64_t table_end(uint64_t sections) {
  return kHeaderSize + sections * kEntrySize;
}

uint64_t checksum(std::span<const uint8_t> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

// XXH3-64 of the header and the section table, the checksum field counted as zero.
uint64_t header_checksum(std::span<const uint8_t> header_and_table) {
  std::vector<uint8_t> copy(header_and_table.begin(), header_and_table.end());
  std::fill_n(copy.begin() + kChecksumOffset, sizeof(uint64_t), 0);
  return checksum(copy);
}

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= kSectionNameMaxLength &&
         std::all_of(name.begin(), name.end(), valid_name_char);
}

std::string mib(uint64_t bytes) {
  return fmt::format("{} MiB", bytes >> 20);
}

}  // namespace

Status StateFileWriter::add(std::string_view name, std::vector<uint8_t> payload) {
  if (!valid_name(name)) {
    return fail(fmt::format("snapshot state section name \"{}\" is not 1 to {} characters of "
                            "[A-Za-z0-9._-]",
                            name, kSectionNameMaxLength),
                "this is a bug in dsec-vmm");
  }
  if (std::any_of(sections_.begin(), sections_.end(),
                  [&](const Section& s) { return s.name == name; })) {
    return fail(fmt::format("snapshot state section \"{}\" was added twice", name),
                "this is a bug in dsec-vmm");
  }
  if (sections_.size() >= kStateFileMaxSections) {
    return fail(fmt::format("snapshot state: more than {} sections", kStateFileMaxSections),
                "this is a bug in dsec-vmm");
  }
  sections_.push_back({std::string(name), std::move(payload)});
  return ok();
}

Result<std::vector<uint8_t>> StateFileWriter::encode() const {
  uint64_t size = table_end(sections_.size());
  for (const Section& section : sections_) {
    size += section.payload.size();
  }
  if (size > kStateFileMaxSize) {
    return fail(fmt::format("the snapshot state would be {} bytes, more than the {} a state file "
                            "may hold",
                            size, mib(kStateFileMaxSize)),
                "this is a bug in dsec-vmm: some component saved far more state than expected");
  }
  ByteWriter out;
  out.put(kMagic);
  out.put<uint32_t>(kStateFileFormatVersion);
  out.put<uint32_t>(static_cast<uint32_t>(sections_.size()));
  out.put<uint64_t>(size);
  out.put<uint64_t>(0);  // the header checksum, filled in below
  uint64_t offset = table_end(sections_.size());
  for (const Section& section : sections_) {
    NameField name{};
    std::copy(section.name.begin(), section.name.end(), name.begin());
    out.put(name);
    out.put<uint64_t>(offset);
    out.put<uint64_t>(section.payload.size());
    out.put<uint64_t>(checksum(section.payload));
    offset += section.payload.size();
  }
  std::vector<uint8_t> bytes = out.take();
  const uint64_t sum = header_checksum(bytes);
  std::memcpy(bytes.data() + kChecksumOffset, &sum, sizeof(sum));
  for (const Section& section : sections_) {
    bytes.insert(bytes.end(), section.payload.begin(), section.payload.end());
  }
  return bytes;
}

Status StateFileWriter::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = DSEC_TRY(encode());
  AtomicFileWriter file = DSEC_TRY(AtomicFileWriter::create(path));
  DSEC_TRY(file.write_at(0, bytes));
  return file.commit();
}

Result<StateFile> StateFile::load(const std::string& path) {
  const std::string source = "snapshot state file " + path;
  OpenFile file = DSEC_TRY(open_regular_file(path));
  // Checked before reading a byte: a huge file (say, the memory file given by mistake)
  // is refused at once.
  if (file.size > kStateFileMaxSize) {
    return fail(fmt::format("{} is {} bytes, more than the {} a state file may hold", source,
                            file.size, mib(kStateFileMaxSize)),
                "is this a snapshot's state file? (the memory file is a separate file)");
  }
  std::vector<uint8_t> bytes(file.size);
  DSEC_TRY(read_exact(file.fd.get(), 0, bytes, path));
  return parse_owned(std::move(bytes), source);
}

Result<StateFile> StateFile::parse(std::span<const uint8_t> bytes, std::string_view source) {
  if (bytes.size() > kStateFileMaxSize) {
    return fail(fmt::format("{} is {} bytes, more than the {} a state file may hold", source,
                            bytes.size(), mib(kStateFileMaxSize)),
                "is this a snapshot's state file? (the memory file is a separate file)");
  }
  return parse_owned(std::vector<uint8_t>(bytes.begin(), bytes.end()), std::string(source));
}

Result<StateFile> StateFile::parse_owned(std::vector<uint8_t> bytes, std::string source) {
  const uint64_t size = bytes.size();
  const auto not_a_state_file = [&] {
    return fail(source +
                    " is not a dsec-vmm snapshot state file (it does not begin with "
                    "\"DSECSNAP\")",
                "give the state file of a snapshot taken by dsec-vmm");
  };
  if (size < kHeaderSize) {
    if (size >= kMagic.size() && std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
      return not_a_state_file();
    }
    return fail(fmt::format("{} is truncated: {} bytes, shorter than its {}-byte header", source,
                            size, kHeaderSize),
                kDamaged);
  }
  ByteReader header{std::span(bytes).first(kHeaderSize)};
  const auto magic = DSEC_TRY(header.get<Magic>("magic"));
  const auto version = DSEC_TRY(header.get<uint32_t>("format version"));
  const auto count = DSEC_TRY(header.get<uint32_t>("section count"));
  const auto file_size = DSEC_TRY(header.get<uint64_t>("file size"));
  const auto stored_checksum = DSEC_TRY(header.get<uint64_t>("header checksum"));
  if (magic != kMagic) {
    return not_a_state_file();
  }
  if (version != kStateFileFormatVersion) {
    return fail(fmt::format("{} was made by a different dsec-vmm format version {}, this one reads "
                            "{}",
                            source, version, kStateFileFormatVersion),
                "take the snapshot again with this dsec-vmm");
  }
  if (count > kStateFileMaxSections) {
    return fail(fmt::format("{} says it has {} sections, more than the {} allowed", source, count,
                            kStateFileMaxSections),
                kDamaged);
  }
  const uint64_t payloads = table_end(count);
  if (size < payloads) {
    return fail(fmt::format("{} is truncated: {} bytes, shorter than its header and section table "
                            "({} bytes; the header says the file has {})",
                            source, size, payloads, file_size),
                kDamaged);
  }
  if (header_checksum(std::span(bytes).first(payloads)) != stored_checksum) {
    return fail(source + ": the header or section table is corrupt (checksum mismatch)", kDamaged);
  }
  if (size < file_size) {
    return fail(fmt::format("{} is truncated: {} bytes of the {} its header gives", source, size,
                            file_size),
                kDamaged);
  }
  if (size > file_size) {
    return fail(
        fmt::format("{} is {} bytes, longer than the {} its header gives", source, size, file_size),
        kDamaged);
  }

  std::vector<Section> sections;
  sections.reserve(count);
  // Every entry's name is checked before any offset, so that the errors below can name the
  // sections they are about.
  ByteReader table{std::span(bytes).subspan(kHeaderSize, payloads - kHeaderSize)};
  std::vector<uint64_t> checksums;
  checksums.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const auto field = DSEC_TRY(table.get<NameField>("section name"));
    const auto offset = DSEC_TRY(table.get<uint64_t>("section offset"));
    const auto length = DSEC_TRY(table.get<uint64_t>("section size"));
    checksums.push_back(DSEC_TRY(table.get<uint64_t>("section checksum")));
    const auto* nul = std::find(field.begin(), field.end(), '\0');
    if (nul == field.end()) {
      return fail(fmt::format("{}: the name of section {} is not terminated", source, i), kDamaged);
    }
    const std::string name(field.begin(), nul);
    if (!valid_name(name) || std::any_of(nul, field.end(), [](char c) { return c != '\0'; })) {
      return fail(fmt::format("{}: the name of section {} is empty, or has characters outside "
                              "[A-Za-z0-9._-]",
                              source, i),
                  kDamaged);
    }
    sections.push_back({name, offset, length});
  }
  std::vector<std::string_view> names;
  names.reserve(sections.size());
  for (const Section& s : sections) {
    names.push_back(s.name);
  }
  std::sort(names.begin(), names.end());
  if (const auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
    return fail(fmt::format("{} has two sections named \"{}\"", source, *twice), kDamaged);
  }
  for (const Section& s : sections) {
    if (s.offset < payloads || s.offset > size || s.size > size - s.offset) {
      return fail(fmt::format("{}: section \"{}\" (offset {}, {} bytes) lies outside the file's "
                              "payload bytes [{}, {})",
                              source, s.name, s.offset, s.size, payloads, size),
                  kDamaged);
    }
  }
  std::vector<const Section*> by_offset;
  for (const Section& s : sections) {
    if (s.size > 0) {
      by_offset.push_back(&s);
    }
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Section* a, const Section* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Section& before = *by_offset[i - 1];
    if (before.offset + before.size > by_offset[i]->offset) {
      return fail(fmt::format("{}: sections \"{}\" and \"{}\" overlap", source, before.name,
                              by_offset[i]->name),
                  kDamaged);
    }
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    const Section& s = sections[i];
    if (checksum(std::span(bytes).subspan(s.offset, s.size)) != checksums[i]) {
      return fail(fmt::format("{}: section \"{}\" is corrupt (checksum mismatch)", source, s.name),
                  kDamaged);
    }
  }
  return StateFile(std::move(source), std::move(bytes), std::move(sections));
}

const StateFile::Section* StateFile::find(std::string_view name) const {
  const auto it = std::find_if(sections_.begin(), sections_.end(),
                               [&](const Section& s) { return s.name == name; });
  return it == sections_.end() ? nullptr : &*it;
}

bool StateFile::has_section(std::string_view name) const {
  return find(name) != nullptr;
}

Result<std::span<const uint8_t>> StateFile::section(std::string_view name) const {
  const Section* s = find(name);
  if (s == nullptr) {
    return fail(fmt::format("{} has no section \"{}\"", source_, name),
                "the snapshot is incomplete or was taken of a VM with other devices: take it "
                "again");
  }
  return std::span<const uint8_t>(bytes_).subspan(s->offset, s->size);
}

std::vector<std::string> StateFile::section_names() const {
  std::vector<std::string> names;
  names.reserve(sections_.size());
  for (const Section& s : sections_) {
    names.push_back(s.name);
  }
  return names;
}

}  // namespace dsec::snapshot
