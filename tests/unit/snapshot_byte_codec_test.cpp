// ByteWriter/ByteReader: what is written reads back the same, and a short or hostile input
// fails with an error that names the field being read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/snapshot/byte_codec.h"

namespace dsec::snapshot {
namespace {

using ::testing::HasSubstr;

struct Registers {
  uint64_t rip;
  uint32_t flags;
  uint16_t selector;
  uint8_t mode;
  uint8_t pad;
  bool operator==(const Registers&) const = default;
};

const Registers kRegisters{0x1122334455667788, 0xdeadbeef, 0x10, 3, 0};
const std::vector<uint8_t> kBlob{1, 2, 3, 0, 255};
const std::array<uint32_t, 3> kMsrs{0x10, 0xc0000080, 0x4b564d00};

std::vector<uint8_t> encode_all() {
  ByteWriter out;
  out.put<uint8_t>(0xab);
  out.put<uint16_t>(0x1234);
  out.put<uint32_t>(0x89abcdef);
  out.put<uint64_t>(0x0102030405060708);
  out.put(kRegisters);
  out.put_bytes(kBlob);
  out.put_string("virtio-blk");
  out.put_array(std::span<const uint32_t>(kMsrs));
  return out.take();
}

// Decodes what encode_all() wrote, checking each value.
Status decode_all(std::span<const uint8_t> bytes) {
  ByteReader in(bytes);
  EXPECT_EQ(DSEC_TRY(in.get<uint8_t>("u8")), 0xab);
  EXPECT_EQ(DSEC_TRY(in.get<uint16_t>("u16")), 0x1234);
  EXPECT_EQ(DSEC_TRY(in.get<uint32_t>("u32")), 0x89abcdefu);
  EXPECT_EQ(DSEC_TRY(in.get<uint64_t>("u64")), 0x0102030405060708u);
  EXPECT_EQ(DSEC_TRY(in.get<Registers>("registers")), kRegisters);
  EXPECT_EQ(DSEC_TRY(in.get_bytes("blob")), kBlob);
  EXPECT_EQ(DSEC_TRY(in.get_string("name")), "virtio-blk");
  EXPECT_EQ(DSEC_TRY(in.get_array<uint32_t>("msrs", 8)),
            std::vector<uint32_t>(kMsrs.begin(), kMsrs.end()));
  return in.expect_end("the test section");
}

TEST(SnapshotByteCodec, WhatIsWrittenReadsBack) {
  const std::vector<uint8_t> bytes = encode_all();
  // 1 + 2 + 4 + 8 + 16 (struct) + 8 + 5 + 8 + 10 + 8 + 12
  EXPECT_EQ(bytes.size(), 82u);
  ASSERT_OK(decode_all(bytes));
}

TEST(SnapshotByteCodec, IntegersAreLittleEndian) {
  ByteWriter out;
  out.put<uint32_t>(0x11223344);
  out.put_string("ab");
  EXPECT_EQ(out.bytes(),
            (std::vector<uint8_t>{0x44, 0x33, 0x22, 0x11, 2, 0, 0, 0, 0, 0, 0, 0, 'a', 'b'}));
}

TEST(SnapshotByteCodec, EveryTruncationFailsNamingAField) {
  const std::vector<uint8_t> bytes = encode_all();
  for (size_t length = 0; length < bytes.size(); ++length) {
    const Status decoded = decode_all(std::span(bytes).first(length));
    ASSERT_FALSE(decoded.has_value()) << length;
    EXPECT_THAT(decoded.error().message(), HasSubstr("snapshot state: truncated while reading "))
        << length;
    EXPECT_THAT(decoded.error().message(),
                HasSubstr("the state file is corrupt or truncated: take the snapshot again"));
  }
  const Status cut = decode_all(std::span(bytes).first(bytes.size() - 1));
  EXPECT_EQ(cut.error().message(),
            "snapshot state: truncated while reading msrs (needs 12 bytes, 11 left); the state "
            "file is corrupt or truncated: take the snapshot again");
}

TEST(SnapshotByteCodec, AHugeLengthFailsWithoutAllocating) {
  ByteWriter out;
  out.put<uint64_t>(UINT64_MAX);
  out.put<uint8_t>(1);
  ByteReader bytes_reader(out.bytes());
  const auto bytes = bytes_reader.get_bytes("blob");
  ASSERT_FALSE(bytes.has_value());
  EXPECT_THAT(bytes.error().message(), HasSubstr("truncated while reading blob"));

  ByteReader array_reader(out.bytes());
  const auto array = array_reader.get_array<uint64_t>("msrs", 1024);
  ASSERT_FALSE(array.has_value());
  EXPECT_EQ(array.error().message(),
            "snapshot state: msrs has 18446744073709551615 entries, more than the 1024 allowed; "
            "the state file is corrupt or from an incompatible dsec-vmm");
}

TEST(SnapshotByteCodec, AnArrayOverItsLimitIsRefusedEvenWhenItsBytesArePresent) {
  ByteWriter out;
  const std::array<uint16_t, 5> items{1, 2, 3, 4, 5};
  out.put_array(std::span<const uint16_t>(items));
  ByteReader in(out.bytes());
  const auto array = in.get_array<uint16_t>("queues", 4);
  ASSERT_FALSE(array.has_value());
  EXPECT_THAT(array.error().message(), HasSubstr("queues has 5 entries, more than the 4 allowed"));
  ByteReader again(out.bytes());
  ASSERT_OK_AND_ASSIGN(const auto all, again.get_array<uint16_t>("queues", 5));
  EXPECT_EQ(all, (std::vector<uint16_t>{1, 2, 3, 4, 5}));
}

TEST(SnapshotByteCodec, EmptyArraysAndBlobsReadBackEmpty) {
  ByteWriter out;
  out.put_array(std::span<const uint64_t>());
  out.put_bytes({});
  ByteReader in(out.bytes());
  ASSERT_OK_AND_ASSIGN(const auto array, in.get_array<uint64_t>("msrs", 16));
  EXPECT_TRUE(array.empty());
  ASSERT_OK_AND_ASSIGN(const auto blob, in.get_bytes("blob"));
  EXPECT_TRUE(blob.empty());
  ASSERT_OK(in.expect_end("the test section"));
}

TEST(SnapshotByteCodec, AnArrayCountTooLargeForTheBytesLeftIsTruncation) {
  // Allowed by a generous limit, but count * 8 would wrap past 2^64.
  ByteWriter out;
  out.put<uint64_t>(uint64_t{1} << 61);
  out.put<uint64_t>(7);
  ByteReader in(out.bytes());
  const auto array = in.get_array<uint64_t>("msrs", UINT64_MAX);
  ASSERT_FALSE(array.has_value());
  EXPECT_THAT(array.error().message(), HasSubstr("truncated while reading msrs"));
}

TEST(SnapshotByteCodec, TrailingBytesAreAnError) {
  std::vector<uint8_t> bytes = encode_all();
  bytes.push_back(0);
  bytes.push_back(0);
  const Status decoded = decode_all(bytes);
  ASSERT_FALSE(decoded.has_value());
  EXPECT_EQ(decoded.error().message(),
            "snapshot state: the test section has 2 unexpected trailing bytes; the state file is "
            "corrupt or from an incompatible dsec-vmm");
}

}  // namespace
}  // namespace dsec::snapshot
