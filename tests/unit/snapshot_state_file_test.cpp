// The snapshot state file: sections written are read back, and every damaged, truncated,
// foreign or hostile file is refused before any section is handed out, with an error that
// says what is wrong and what to do.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/file_text.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/snapshot/byte_codec.h"
#include "vmm/snapshot/state_file.h"

namespace dsec::snapshot {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr size_t kHeaderSize = 32;
constexpr size_t kEntrySize = 56;
constexpr const char* kDamaged = "; the state file is damaged: take the snapshot again";

std::vector<uint8_t> vcpu_payload() {
  ByteWriter out;
  out.put<uint64_t>(0xfff0);
  out.put_string("registers");
  return out.take();
}

// Three sections of different sizes, one empty.
StateFileWriter three_sections() {
  StateFileWriter writer;
  EXPECT_TRUE(writer.add("vm", std::vector<uint8_t>(100, 0x11)).has_value());
  EXPECT_TRUE(writer.add("vcpu.0", vcpu_payload()).has_value());
  EXPECT_TRUE(writer.add("device.virtio-blk.0", {}).has_value());
  return writer;
}

std::vector<uint8_t> three_section_bytes() {
  return three_sections().encode().value();
}

std::string error_of(const Result<StateFile>& file) {
  EXPECT_FALSE(file.has_value());
  return file.has_value() ? std::string("(no error)") : file.error().message();
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  return error_of(StateFile::parse(bytes));
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// A state file written by hand, for what StateFileWriter never writes: each entry's name
// field, offset, size and checksum as given. The header checksum is right unless told.
struct RawEntry {
  std::array<char, 32> name{};
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;
};

RawEntry entry(const std::string& name, uint64_t offset, std::span<const uint8_t> file_payload,
               uint64_t size) {
  RawEntry e;
  std::memcpy(e.name.data(), name.data(), std::min(name.size(), e.name.size()));
  e.offset = offset;
  e.size = size;
  e.checksum = XXH3_64bits(file_payload.data(), file_payload.size());
  return e;
}

std::vector<uint8_t> raw_file(const std::vector<RawEntry>& entries,
                              const std::vector<uint8_t>& payloads, uint32_t count_override = 0) {
  ByteWriter out;
  out.put(std::array<char, 8>{'D', 'S', 'E', 'C', 'S', 'N', 'A', 'P'});
  out.put<uint32_t>(1);
  out.put<uint32_t>(count_override != 0 ? count_override : static_cast<uint32_t>(entries.size()));
  out.put<uint64_t>(kHeaderSize + kEntrySize * entries.size() + payloads.size());
  out.put<uint64_t>(0);
  for (const RawEntry& e : entries) {
    out.put(e);
  }
  std::vector<uint8_t> bytes = out.take();
  const uint64_t sum = XXH3_64bits(bytes.data(), bytes.size());
  std::memcpy(bytes.data() + 24, &sum, sizeof(sum));
  bytes.insert(bytes.end(), payloads.begin(), payloads.end());
  return bytes;
}

TEST(SnapshotStateFile, SectionsWrittenAreReadBack) {
  test::TempDir dir;
  const std::string path = dir.file("state");
  ASSERT_OK(three_sections().write(path));
  EXPECT_THAT(dir.entries(), ElementsAre("state"));  // no temporary file left behind

  ASSERT_OK_AND_ASSIGN(const StateFile file, StateFile::load(path));
  EXPECT_THAT(file.section_names(), ElementsAre("vm", "vcpu.0", "device.virtio-blk.0"));
  ASSERT_OK_AND_ASSIGN(const auto vm, file.section("vm"));
  EXPECT_EQ(std::vector<uint8_t>(vm.begin(), vm.end()), std::vector<uint8_t>(100, 0x11));
  ASSERT_OK_AND_ASSIGN(const auto vcpu, file.section("vcpu.0"));
  ByteReader reader(vcpu);
  ASSERT_OK_AND_ASSIGN(const uint64_t rip, reader.get<uint64_t>("rip"));
  EXPECT_EQ(rip, 0xfff0u);
  ASSERT_OK_AND_ASSIGN(const std::string text, reader.get_string("text"));
  EXPECT_EQ(text, "registers");
  ASSERT_OK(reader.expect_end("vcpu.0"));
  ASSERT_OK_AND_ASSIGN(const auto blk, file.section("device.virtio-blk.0"));
  EXPECT_TRUE(blk.empty());
  EXPECT_TRUE(file.has_section("vcpu.0"));
  EXPECT_FALSE(file.has_section("vcpu.1"));
}

TEST(SnapshotStateFile, TheLayoutIsTheDocumentedOne) {
  const std::vector<uint8_t> bytes = three_section_bytes();
  const size_t payloads = kHeaderSize + 3 * kEntrySize;
  ASSERT_EQ(bytes.size(), payloads + 100 + 25);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "DSECSNAP");
  ByteReader header(bytes);
  ASSERT_TRUE(header.get<uint64_t>("magic").has_value());
  EXPECT_EQ(header.get<uint32_t>("version").value(), 1u);
  EXPECT_EQ(header.get<uint32_t>("count").value(), 3u);
  EXPECT_EQ(header.get<uint64_t>("file size").value(), bytes.size());
  ASSERT_TRUE(header.get<uint64_t>("checksum").has_value());
  const auto first = header.get<std::array<char, 32>>("name").value();
  EXPECT_STREQ(first.data(), "vm");
  EXPECT_EQ(header.get<uint64_t>("offset").value(), payloads);
  EXPECT_EQ(header.get<uint64_t>("size").value(), 100u);
  EXPECT_EQ(header.get<uint64_t>("checksum").value(), XXH3_64bits(bytes.data() + payloads, 100));
  // The header checksum covers the header (its own field as zero) and the table.
  std::vector<uint8_t> table(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(payloads));
  std::fill_n(table.begin() + 24, 8, 0);
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + 24, 8);
  EXPECT_EQ(stored, XXH3_64bits(table.data(), table.size()));
}

TEST(SnapshotStateFile, AMissingSectionIsNamed) {
  ASSERT_OK_AND_ASSIGN(const StateFile file,
                       StateFile::parse(three_section_bytes(), "snapshot state file /s/state"));
  const auto missing = file.section("vcpu.1");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().message(),
            "snapshot state file /s/state has no section \"vcpu.1\"; the snapshot is incomplete "
            "or was taken of a VM with other devices: take it again");
}

TEST(SnapshotStateFile, ACorruptPayloadByteNamesItsSection) {
  test::TempDir dir;
  const std::vector<uint8_t> good = three_section_bytes();
  const size_t payloads = kHeaderSize + 3 * kEntrySize;
  for (size_t at = payloads; at < good.size(); ++at) {
    std::vector<uint8_t> bytes = good;
    bytes[at] ^= 0x04;
    const char* name = at < payloads + 100 ? "vm" : "vcpu.0";
    EXPECT_THAT(parse_error(bytes),
                HasSubstr(std::string("section \"") + name + "\" is corrupt (checksum mismatch)"))
        << at;
  }
  std::vector<uint8_t> bytes = good;
  bytes[payloads + 100 + 3] ^= 0xff;
  const std::string path = dir.file("state");
  write_file(path, bytes);
  EXPECT_EQ(error_of(StateFile::load(path)), "snapshot state file " + path +
                                                 ": section \"vcpu.0\" is corrupt (checksum "
                                                 "mismatch)" +
                                                 kDamaged);
}

TEST(SnapshotStateFile, EveryCorruptHeaderOrTableByteIsRefused) {
  const std::vector<uint8_t> good = three_section_bytes();
  for (size_t at = 0; at < kHeaderSize + 3 * kEntrySize; ++at) {
    std::vector<uint8_t> bytes = good;
    bytes[at] ^= 0x01;
    EXPECT_FALSE(StateFile::parse(bytes).has_value()) << at;
  }
  std::vector<uint8_t> bytes = good;
  bytes[kHeaderSize + 40] ^= 0x01;  // the first section's size
  EXPECT_EQ(parse_error(bytes),
            std::string("snapshot state file: the header or section table is corrupt (checksum "
                        "mismatch)") +
                kDamaged);
  bytes = good;
  bytes[26] ^= 0x80;  // the checksum itself
  EXPECT_THAT(parse_error(bytes), HasSubstr("the header or section table is corrupt"));
}

TEST(SnapshotStateFile, EveryTruncationIsRefused) {
  const std::vector<uint8_t> good = three_section_bytes();
  for (size_t length = 0; length < good.size(); ++length) {
    const std::vector<uint8_t> bytes(good.begin(),
                                     good.begin() + static_cast<std::ptrdiff_t>(length));
    EXPECT_THAT(parse_error(bytes), StartsWith("snapshot state file is truncated: ")) << length;
  }
  EXPECT_EQ(parse_error(std::vector<uint8_t>(good.begin(), good.end() - 1)),
            std::string("snapshot state file is truncated: 324 bytes of the 325 its header "
                        "gives") +
                kDamaged);
  EXPECT_EQ(parse_error(std::vector<uint8_t>(good.begin(), good.begin() + 100)),
            std::string("snapshot state file is truncated: 100 bytes, shorter than its header "
                        "and section table (200 bytes; the header says the file has 325)") +
                kDamaged);
}

TEST(SnapshotStateFile, BytesAfterTheEndAreRefused) {
  std::vector<uint8_t> bytes = three_section_bytes();
  bytes.push_back(0);
  EXPECT_EQ(parse_error(bytes),
            std::string("snapshot state file is 326 bytes, longer than the 325 its header "
                        "gives") +
                kDamaged);
}

TEST(SnapshotStateFile, AnotherFormatVersionIsRefusedWithWhatToDo) {
  std::vector<uint8_t> bytes = three_section_bytes();
  bytes[8] = 2;
  EXPECT_EQ(parse_error(bytes),
            "snapshot state file was made by a different dsec-vmm format version 2, this one "
            "reads 1; take the snapshot again with this dsec-vmm");
}

TEST(SnapshotStateFile, AFileOfAnotherKindIsRefused) {
  const std::string text = "#!/bin/sh\necho this is not a snapshot at all, but long enough\n";
  const std::string expected =
      "snapshot state file is not a dsec-vmm snapshot state file (it does not begin with "
      "\"DSECSNAP\"); give the state file of a snapshot taken by dsec-vmm";
  EXPECT_EQ(parse_error(std::vector<uint8_t>(text.begin(), text.end())), expected);
  EXPECT_EQ(parse_error(std::vector<uint8_t>(text.begin(), text.begin() + 12)), expected);
}

TEST(SnapshotStateFile, AnOversizedFileIsRefusedBeforeItIsRead) {
  test::TempDir dir;
  const std::string path = dir.file("state");
  write_file(path, three_section_bytes());
  // Sparse: the loader must refuse it from its size alone.
  ASSERT_EQ(::truncate(path.c_str(), kStateFileMaxSize + 1), 0);
  EXPECT_EQ(error_of(StateFile::load(path)),
            "snapshot state file " + path +
                " is 16777217 bytes, more than the 16 MiB a state file may hold; is this a "
                "snapshot's state file? (the memory file is a separate file)");
  ASSERT_EQ(::truncate(path.c_str(), kStateFileMaxSize), 0);
  EXPECT_THAT(error_of(StateFile::load(path)),
              HasSubstr("is 16777216 bytes, longer than the 325 its header gives"));

  const std::vector<uint8_t> huge(kStateFileMaxSize + 1);
  EXPECT_THAT(parse_error(huge), HasSubstr("more than the 16 MiB a state file may hold"));
}

TEST(SnapshotStateFile, AMissingFileIsNamed) {
  const auto file = StateFile::load("/nonexistent/snapshot/state");
  EXPECT_THAT(error_of(file), StartsWith("cannot open /nonexistent/snapshot/state: "));
}

TEST(SnapshotStateFile, TheWriterRefusesBadAndDuplicateNames) {
  StateFileWriter writer;
  ASSERT_OK(writer.add("vcpu.0", {1}));
  const Status twice = writer.add("vcpu.0", {2});
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().message(),
            "snapshot state section \"vcpu.0\" was added twice; this is a bug in dsec-vmm");
  EXPECT_FALSE(writer.add("", {}).has_value());
  EXPECT_FALSE(writer.add("device/blk", {}).has_value());
  EXPECT_FALSE(writer.add("with space", {}).has_value());
  EXPECT_FALSE(writer.add(std::string(32, 'a'), {}).has_value());
  ASSERT_OK(writer.add(std::string(31, 'a'), {}));
  ASSERT_OK_AND_ASSIGN(const auto bytes, writer.encode());
  ASSERT_OK_AND_ASSIGN(const StateFile file, StateFile::parse(bytes));
  EXPECT_THAT(file.section_names(), ElementsAre("vcpu.0", std::string(31, 'a')));
}

TEST(SnapshotStateFile, TheWriterRefusesStateOverTheCap) {
  StateFileWriter writer;
  ASSERT_OK(writer.add("vm", std::vector<uint8_t>(kStateFileMaxSize)));
  const auto bytes = writer.encode();
  ASSERT_FALSE(bytes.has_value());
  EXPECT_THAT(bytes.error().message(), HasSubstr("more than the 16 MiB a state file may hold"));
  test::TempDir dir;
  EXPECT_FALSE(writer.write(dir.file("state")).has_value());
  EXPECT_TRUE(dir.entries().empty());
}

TEST(SnapshotStateFile, AFailedWriteLeavesThePreviousFile) {
  test::TempDir dir;
  const std::string path = dir.file("state");
  ASSERT_OK(three_sections().write(path));
  const std::string before = test::file_text(path);
  StateFileWriter bigger;
  ASSERT_OK(bigger.add("vm", std::vector<uint8_t>(kStateFileMaxSize)));
  EXPECT_FALSE(bigger.write(path).has_value());
  EXPECT_EQ(test::file_text(path), before);
  // A second snapshot replaces the first.
  StateFileWriter other;
  ASSERT_OK(other.add("other", {7}));
  ASSERT_OK(other.write(path));
  ASSERT_OK_AND_ASSIGN(const StateFile file, StateFile::load(path));
  EXPECT_THAT(file.section_names(), ElementsAre("other"));
  EXPECT_THAT(dir.entries(), ElementsAre("state"));

  const Status no_directory = other.write(dir.file("missing/state"));
  ASSERT_FALSE(no_directory.has_value());
  EXPECT_THAT(no_directory.error().message(),
              StartsWith("cannot create a temporary file in " + dir.file("missing").string() +
                         " to write " + dir.file("missing/state").string() + ": No such file"));
}

// Files StateFileWriter never writes, made by hand with correct checksums.
TEST(SnapshotStateFile, DuplicateNamesInAFileAreRefused) {
  const std::vector<uint8_t> payloads{1, 2};
  const uint64_t base = kHeaderSize + 2 * kEntrySize;
  const auto bytes = raw_file({entry("vcpu.0", base, std::span(payloads).first(1), 1),
                               entry("vcpu.0", base + 1, std::span(payloads).subspan(1), 1)},
                              payloads);
  EXPECT_EQ(parse_error(bytes),
            std::string("snapshot state file has two sections named \"vcpu.0\"") + kDamaged);
}

TEST(SnapshotStateFile, UnterminatedAndMalformedNamesAreRefused) {
  const uint64_t base = kHeaderSize + kEntrySize;
  RawEntry unterminated = entry("", base, {}, 0);
  unterminated.name.fill('a');
  EXPECT_EQ(parse_error(raw_file({unterminated}, {})),
            std::string("snapshot state file: the name of section 0 is not terminated") + kDamaged);
  for (const std::string& name : {std::string(""), std::string("a b"), std::string("\x01\xff")}) {
    EXPECT_THAT(parse_error(raw_file({entry(name, base, {}, 0)}, {})),
                HasSubstr("the name of section 0 is empty, or has characters outside"))
        << name;
  }
  RawEntry junk_after_name = entry("vm", base, {}, 0);
  junk_after_name.name[5] = 'x';
  EXPECT_THAT(parse_error(raw_file({junk_after_name}, {})),
              HasSubstr("the name of section 0 is empty"));
}

TEST(SnapshotStateFile, SectionsOutsideThePayloadBytesAreRefused) {
  const std::vector<uint8_t> payloads{1, 2, 3, 4};
  const uint64_t base = kHeaderSize + kEntrySize;
  const std::string outside = "snapshot state file: section \"vm\" (offset ";
  // Past the end, reaching past the end, over the table, and a size that wraps.
  for (const auto& [offset, size] : std::vector<std::pair<uint64_t, uint64_t>>{
           {base + 5, 0}, {base + 2, 3}, {base - 8, 4}, {0, 4}, {base + 1, UINT64_MAX}}) {
    EXPECT_THAT(parse_error(raw_file({entry("vm", offset, payloads, size)}, payloads)),
                StartsWith(outside))
        << offset << " " << size;
  }
  EXPECT_EQ(parse_error(raw_file({entry("vm", base + 2, payloads, 3)}, payloads)),
            std::string("snapshot state file: section \"vm\" (offset 90, 3 bytes) lies outside "
                        "the file's payload bytes [88, 92)") +
                kDamaged);
  // At the very end, empty, is inside.
  EXPECT_TRUE(StateFile::parse(raw_file({entry("vm", base + 4, {}, 0)}, payloads)).has_value());
}

TEST(SnapshotStateFile, OverlappingSectionsAreRefused) {
  const std::vector<uint8_t> payloads{1, 2, 3, 4};
  const uint64_t base = kHeaderSize + 2 * kEntrySize;
  const auto bytes = raw_file({entry("b", base + 1, std::span(payloads).subspan(1), 3),
                               entry("a", base, std::span(payloads).first(2), 2)},
                              payloads);
  EXPECT_EQ(parse_error(bytes),
            std::string("snapshot state file: sections \"a\" and \"b\" overlap") + kDamaged);
  // Back to back in any order is fine.
  const auto adjacent = raw_file({entry("b", base + 2, std::span(payloads).subspan(2), 2),
                                  entry("a", base, std::span(payloads).first(2), 2)},
                                 payloads);
  ASSERT_OK_AND_ASSIGN(const StateFile file, StateFile::parse(adjacent));
  ASSERT_OK_AND_ASSIGN(const auto b, file.section("b"));
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), (std::vector<uint8_t>{3, 4}));
}

TEST(SnapshotStateFile, TooManySectionsAreRefusedBeforeTheTableIsRead) {
  EXPECT_EQ(parse_error(raw_file({}, {}, kStateFileMaxSections + 1)),
            std::string("snapshot state file says it has 4097 sections, more than the 4096 "
                        "allowed") +
                kDamaged);
}

}  // namespace
}  // namespace dsec::snapshot
