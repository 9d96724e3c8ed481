// libFuzzer target: hostile bytes as a snapshot state file. StateFile::parse must refuse or
// accept without reading out of bounds; every section of an accepted file is read through
// ByteReader as a restore would, and written again, the copy must parse to the same sections.
// Each input is tried twice: as it is, and with its checksums made right, so that the checks
// behind the checksums (names, bounds, overlaps) are reached too.
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "vmm/snapshot/byte_codec.h"
#include "vmm/snapshot/state_file.h"

namespace {

using dsec::snapshot::ByteReader;

// Reads a section as some component's restore might: fields, a blob, an array, the end.
void read_section(std::span<const uint8_t> payload) {
  ByteReader in(payload);
  (void)in.get<uint32_t>("u32");
  (void)in.get<uint64_t>("u64");
  (void)in.get_string("name");
  (void)in.get_array<uint64_t>("msrs", 1024);
  (void)in.get_bytes("blob");
  (void)in.expect_end("section");
}

// The input with every checksum it has room for recomputed (docs/snapshot-format.md): each
// section table entry's payload checksum where the payload lies inside the input, then the
// header checksum.
std::vector<uint8_t> with_checksums_fixed(std::span<const uint8_t> input) {
  constexpr size_t kHeader = 32;
  constexpr size_t kEntry = 56;
  std::vector<uint8_t> bytes(input.begin(), input.end());
  if (bytes.size() < kHeader) return bytes;
  uint32_t count = 0;
  std::memcpy(&count, bytes.data() + 12, sizeof(count));
  const size_t entries = std::min<size_t>(count, (bytes.size() - kHeader) / kEntry);
  for (size_t i = 0; i < entries; ++i) {
    uint8_t* entry = bytes.data() + kHeader + i * kEntry;
    uint64_t offset = 0;
    uint64_t length = 0;
    std::memcpy(&offset, entry + 32, sizeof(offset));
    std::memcpy(&length, entry + 40, sizeof(length));
    if (offset <= bytes.size() && length <= bytes.size() - offset) {
      const uint64_t sum = XXH3_64bits(bytes.data() + offset, length);
      std::memcpy(entry + 48, &sum, sizeof(sum));
    }
  }
  std::memset(bytes.data() + 24, 0, sizeof(uint64_t));
  const uint64_t sum = XXH3_64bits(bytes.data(), kHeader + entries * kEntry);
  std::memcpy(bytes.data() + 24, &sum, sizeof(sum));
  return bytes;
}

void check(std::span<const uint8_t> input) {
  using namespace dsec::snapshot;
  const auto file = StateFile::parse(input);
  if (!file) {
    if (file.error().message().empty()) std::abort();
    return;
  }
  StateFileWriter writer;
  std::vector<std::vector<uint8_t>> payloads;
  for (const std::string& name : file->section_names()) {
    const auto payload = file->section(name);
    if (!payload || !file->has_section(name)) std::abort();
    read_section(*payload);
    payloads.emplace_back(payload->begin(), payload->end());
    if (!writer.add(name, payloads.back())) std::abort();
  }
  const auto bytes = writer.encode();
  if (!bytes) std::abort();
  const auto again = StateFile::parse(*bytes);
  if (!again || again->section_names() != file->section_names()) std::abort();
  for (size_t i = 0; i < payloads.size(); ++i) {
    const auto payload = again->section(file->section_names()[i]);
    if (!payload ||
        !std::equal(payload->begin(), payload->end(), payloads[i].begin(), payloads[i].end())) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check(std::span(data, size));
  check(with_checksums_fixed(std::span(data, size)));
  return 0;
}
