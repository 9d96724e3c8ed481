// The virtio-blk request parser: well-formed requests in any descriptor layout come out as
// the driver meant them, and every malformed one is refused with the status the guest will
// read (or none, when the chain has no byte to put it in).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "tests/support/result_matchers.h"
#include "vmm/devices/virtio/block_request.h"

namespace dsec::virtio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kRamEnd = 1 << 20;  // guest RAM is [0, 1 MiB)
constexpr uint64_t kHeader = 0x1000;
constexpr uint64_t kData = 0x10000;
constexpr uint64_t kStatus = 0x2000;
constexpr uint64_t kCapacity = 64;  // sectors

GuestMemory make_memory() {
  const std::array<GuestRange, 1> ranges{{{0, kRamEnd}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

// The request of a parse that must succeed (an empty one, failing the test, otherwise).
BlockRequest accepted(ParsedBlockRequest parsed) {
  EXPECT_TRUE(parsed.has_value()) << "refused: " << (parsed ? "" : parsed.error().reason);
  return parsed ? std::move(*parsed) : BlockRequest{};
}

class BlockRequestTest : public ::testing::Test {
 protected:
  void write_header(uint32_t type, uint64_t sector, uint64_t at = kHeader) {
    ASSERT_OK(memory_.write_obj<uint32_t>(at, type));
    ASSERT_OK(memory_.write_obj<uint32_t>(at + 4, 0));
    ASSERT_OK(memory_.write_obj<uint64_t>(at + 8, sector));
  }

  // The usual layout: header, data (readable for OUT, writable otherwise), status.
  DescriptorChain chain(uint32_t type, uint64_t sector, uint64_t data_len) {
    write_header(type, sector);
    DescriptorChain c;
    c.head = 3;
    c.readable.push_back({kHeader, kBlkHeaderBytes});
    if (data_len != 0) {
      (type == kBlkTypeOut ? c.readable : c.writable).push_back({kData, data_len});
    }
    c.writable.push_back({kStatus, 1});
    return c;
  }

  ParsedBlockRequest parse(const DescriptorChain& c) {
    return parse_block_request(memory_, c, limits_);
  }

  // Expects a refusal with `status` written at kStatus, for `reason`.
  void expect_rejected(const DescriptorChain& c, const std::string& reason,
                       uint8_t status = kBlkStatusIoErr) {
    const ParsedBlockRequest parsed = parse(c);
    ASSERT_FALSE(parsed.has_value()) << "accepted a request that is " << reason;
    EXPECT_EQ(parsed.error().status, status);
    EXPECT_EQ(parsed.error().status_gpa, kStatus);
    EXPECT_THAT(parsed.error().reason, HasSubstr(reason));
  }

  GuestMemory memory_ = make_memory();
  BlockLimits limits_{.capacity_sectors = kCapacity, .read_only = false};
};

TEST_F(BlockRequestTest, ReadNamesItsSectorDataAndStatus) {
  const BlockRequest r = accepted(parse(chain(kBlkTypeIn, 7, 1024)));
  EXPECT_EQ(r.type, kBlkTypeIn);
  EXPECT_EQ(r.sector, 7u);
  EXPECT_THAT(r.data, ElementsAre(GuestRange{kData, 1024}));
  EXPECT_EQ(r.data_bytes, 1024u);
  EXPECT_EQ(r.status_gpa, kStatus);
}

TEST_F(BlockRequestTest, WriteTakesItsDataFromTheReadableBuffers) {
  const BlockRequest r = accepted(parse(chain(kBlkTypeOut, 0, 512)));
  EXPECT_EQ(r.type, kBlkTypeOut);
  EXPECT_THAT(r.data, ElementsAre(GuestRange{kData, 512}));
  EXPECT_EQ(r.status_gpa, kStatus);
}

TEST_F(BlockRequestTest, AnyLayoutHeaderSplitDataAndStatusShareABuffer) {
  // VERSION_1 implies ANY_LAYOUT: the header in two pieces, the data and the status in
  // one writable buffer.
  write_header(kBlkTypeIn, 2, 0x3000 - 4);
  ASSERT_OK(memory_.write_obj<uint64_t>(0x5000, 2));  // the sector's 8 bytes, moved
  DescriptorChain c;
  c.readable = {{0x3000 - 4, 8}, {0x5000, 8}};
  c.writable = {{kData, 512 + 1}};
  const BlockRequest r = accepted(parse(c));
  EXPECT_EQ(r.sector, 2u);
  EXPECT_THAT(r.data, ElementsAre(GuestRange{kData, 512}));
  EXPECT_EQ(r.status_gpa, kData + 512);

  // Header and data in one readable buffer, for a write.
  write_header(kBlkTypeOut, 1, kData - kBlkHeaderBytes);
  DescriptorChain w;
  w.readable = {{kData - kBlkHeaderBytes, kBlkHeaderBytes + 1024}};
  w.writable = {{kStatus, 0}, {kStatus, 1}, {kStatus + 1, 0}};  // empty pieces count for nothing
  const BlockRequest wr = accepted(parse(w));
  EXPECT_THAT(wr.data, ElementsAre(GuestRange{kData, 1024}));
  EXPECT_EQ(wr.status_gpa, kStatus);
}

TEST_F(BlockRequestTest, NoWritableByteMeansNoStatusToWrite) {
  DescriptorChain c = chain(kBlkTypeIn, 0, 0);
  c.writable.clear();
  const ParsedBlockRequest parsed = parse(c);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().status_gpa, std::nullopt);

  // The status in a device-readable buffer is no status at all.
  DescriptorChain ro = chain(kBlkTypeOut, 0, 512);
  ro.writable.clear();
  ro.readable.push_back({kStatus, 1});
  const ParsedBlockRequest parsed_ro = parse(ro);
  ASSERT_FALSE(parsed_ro.has_value());
  EXPECT_EQ(parsed_ro.error().status_gpa, std::nullopt);
  EXPECT_THAT(parsed_ro.error().reason, HasSubstr("status"));
}

TEST_F(BlockRequestTest, HeaderShorterThan16BytesIsAnIoError) {
  DescriptorChain c = chain(kBlkTypeIn, 0, 512);
  c.readable = {{kHeader, 15}};
  expect_rejected(c, "header shorter");
  c.readable.clear();
  expect_rejected(c, "header shorter");
}

TEST_F(BlockRequestTest, HeaderOutsideGuestMemoryIsAnIoError) {
  // A chain read from the queue never holds such a buffer; a hand-made one must not crash.
  DescriptorChain c = chain(kBlkTypeIn, 0, 512);
  c.readable = {{kRamEnd - 8, 16}};
  expect_rejected(c, "header not readable");
}

TEST_F(BlockRequestTest, DataNotAMultipleOf512IsAnIoError) {
  expect_rejected(chain(kBlkTypeIn, 0, 511), "multiple of 512");
  expect_rejected(chain(kBlkTypeOut, 0, 513), "multiple of 512");
}

TEST_F(BlockRequestTest, SectorsMustLieInsideTheDisk) {
  ASSERT_TRUE(parse(chain(kBlkTypeIn, kCapacity - 2, 1024)).has_value());
  ASSERT_TRUE(parse(chain(kBlkTypeIn, kCapacity, 0)).has_value());  // empty, at the end
  expect_rejected(chain(kBlkTypeIn, kCapacity - 1, 1024), "outside the disk");
  expect_rejected(chain(kBlkTypeOut, kCapacity, 512), "outside the disk");
  expect_rejected(chain(kBlkTypeIn, kCapacity + 1, 0), "outside the disk");
}

TEST_F(BlockRequestTest, SectorTimes512OverflowIsAnIoError) {
  // 2^55 * 512 wraps to 0 and UINT64_MAX + 1 to 0: neither may pass as sector 0.
  expect_rejected(chain(kBlkTypeIn, uint64_t{1} << 55, 512), "outside the disk");
  expect_rejected(chain(kBlkTypeIn, std::numeric_limits<uint64_t>::max(), 512), "outside the disk");
  limits_.capacity_sectors = std::numeric_limits<uint64_t>::max() / 512;
  expect_rejected(chain(kBlkTypeIn, limits_.capacity_sectors, 512), "outside the disk");
}

TEST_F(BlockRequestTest, WriteToAReadOnlyDiskIsAnIoError) {
  limits_.read_only = true;
  expect_rejected(chain(kBlkTypeOut, 0, 512), "read-only");
  EXPECT_TRUE(parse(chain(kBlkTypeIn, 0, 512)).has_value());
  EXPECT_TRUE(parse(chain(kBlkTypeFlush, 0, 0)).has_value());
}

TEST_F(BlockRequestTest, UnknownTypesAreUnsupported) {
  for (uint32_t type : {2u, 11u /*DISCARD*/, 13u /*WRITE_ZEROES*/, 0xffffffffu}) {
    expect_rejected(chain(type, 0, 512), "unsupported", kBlkStatusUnsupp);
  }
}

TEST_F(BlockRequestTest, BytesWhereTheTypeHasNoneAreAnIoError) {
  DescriptorChain in = chain(kBlkTypeIn, 0, 512);
  in.readable.push_back({kData + 0x1000, 512});
  expect_rejected(in, "IN with device-readable");
  DescriptorChain out = chain(kBlkTypeOut, 0, 512);
  out.writable = {{kData + 0x1000, 512}, {kStatus, 1}};
  expect_rejected(out, "OUT with device-writable");
  expect_rejected(chain(kBlkTypeFlush, 0, 512), "FLUSH with data");
  const BlockRequest flush = accepted(parse(chain(kBlkTypeFlush, 99, 0)));
  EXPECT_TRUE(flush.data.empty());
}

TEST_F(BlockRequestTest, GetIdWritesAtMost20Bytes) {
  const BlockRequest r = accepted(parse(chain(kBlkTypeGetId, 0, 512)));
  EXPECT_EQ(r.type, kBlkTypeGetId);
  EXPECT_THAT(r.data, ElementsAre(GuestRange{kData, kBlkIdBytes}));
  const BlockRequest small = accepted(parse(chain(kBlkTypeGetId, 0, 8)));
  EXPECT_EQ(small.data_bytes, 8u);
  expect_rejected(chain(kBlkTypeGetId, 0, 0), "GET_ID without room");
}

TEST_F(BlockRequestTest, TooManySegmentsOrBytesAreRefused) {
  limits_.max_segments = 2;
  DescriptorChain c = chain(kBlkTypeIn, 0, 0);
  c.writable = {{kData, 512}, {kData + 0x1000, 512}, {kData + 0x2000, 512}, {kStatus, 1}};
  expect_rejected(c, "seg_max");
  limits_.max_segments = 254;
  limits_.max_data_bytes = 1024;
  expect_rejected(chain(kBlkTypeIn, 0, 1536), "longer than");
}

}  // namespace
}  // namespace dsec::virtio
