// The hostile guest against virtio-blk (virtio 1.2, 5.2.6): requests the device must refuse
// with a status (sectors outside the disk, bad lengths and layouts, unknown types, too
// many segments), a flood of one chain published again and again, a reset with requests
// in flight, and reads into the queue's own rings. The device answers each refusal and
// keeps serving; where the ring itself is wrecked it serves again after a reset.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "tests/hostile/attacks.h"

namespace dsec::test::hostile {
namespace {

// A refused request at head 0: `data_len` data bytes in one buffer (writable unless `out`),
// then the status byte.
void refused(Script& s, Driver& blk, const std::string& name, uint32_t type, uint64_t sector,
             uint32_t data_len, uint8_t status = kBlkIoErr) {
  s.label(name);
  block_request(blk, type, sector, data_len, status, 1);
}

void refused_requests(Script& s, Driver& blk) {
  blk.init();
  refused(s, blk, "a read at the sector past the disk", kBlkIn, kDiskSectors, 512);
  refused(s, blk, "a read at sector 2^64 - 1", kBlkIn, ~0ULL, 512);
  refused(s, blk, "a read straddling the end of the disk", kBlkIn, kDiskSectors - 1, 1024);
  refused(s, blk, "a write straddling the end of the disk", kBlkOut, kDiskSectors - 1, 1024);
  refused(s, blk, "a read of 100 bytes", kBlkIn, 0, 100);
  refused(s, blk, "a write of 513 bytes", kBlkOut, 0, 513);
  refused(s, blk, "a flush with data", kBlkFlush, 0, 512);
  refused(s, blk, "an unknown request type", 0x42, 0, 0, kBlkUnsupp);
  refused(s, blk, "DISCARD, which is not offered", 11, 0, 512, kBlkUnsupp);
  refused(s, blk, "GET_ID without room for the id", kBlkGetId, 0, 0);

  const BlockBuffers b = block_buffers(blk);
  s.label("a header of 8 bytes");
  write_block_header(blk, kBlkIn, 0);
  blk.desc(0, 0, b.header, 8, kNext, 1);
  blk.desc(0, 1, b.status, 1, kWrite);
  blk.publish(0, 0);
  blk.notify(0);
  blk.wait_used(0);
  blk.expect_last_used(0, 0, 1);
  s.expect(b.status, kBlkIoErr, 1);

  s.label("no status byte: the chain comes back with nothing written");
  write_block_header(blk, kBlkIn, 0);
  blk.desc(0, 0, b.header, 16, kNext, 1);
  blk.desc(0, 1, b.status, 1, 0);
  blk.publish(0, 0);
  blk.notify(0);
  blk.wait_used(0);
  blk.expect_last_used(0, 0, 0);
  s.expect(b.status, 0xff, 1);

  s.label("a read into 255 buffers, one more than seg_max");
  write_block_header(blk, kBlkIn, 0);
  const uint64_t table = b.data + 0x8000;  // 257 entries past 255 data buffers of 64 bytes
  blk.desc_in(table, 0, b.header, 16, kNext, 1);
  for (uint16_t i = 1; i < 255; ++i) {
    blk.desc_in(table, i, b.data + 64 * (i - 1), 64, kWrite | kNext, static_cast<uint16_t>(i + 1));
  }
  // The last data buffer makes the total 32 whole sectors: only the segment count is wrong.
  blk.desc_in(table, 255, b.data + 64 * 254, 512 * 32 - 64 * 254, kWrite | kNext, 256);
  blk.desc_in(table, 256, b.status, 1, kWrite);
  blk.desc(0, 0, table, 257 * 16, kIndirect);
  blk.publish(0, 0);
  blk.notify(0);
  blk.wait_used(0);
  blk.expect_last_used(0, 0, 1);
  s.expect(b.status, kBlkIoErr, 1);

  s.label("GET_ID into 4 bytes takes the first 4 of the id");
  block_request(blk, kBlkGetId, 0, 4, kBlkOk, 5);
  s.label("after the refusals, a read");
  block_read(blk, 11);
}

// Where reads still in flight at a reset put their data: 1 MiB clear of everything else.
constexpr uint64_t kFloodBuffer = 48ULL << 20;

// One chain (a 64 KiB read at head 0) published `count` times in a 256-entry ring, in
// rounds of a whole ring: the device may hold only so many requests at once.
void same_chain_again_and_again(Script& s, Driver& blk, uint32_t rounds) {
  const BlockBuffers b = block_buffers(blk);
  write_block_header(blk, kBlkIn, 16);
  blk.desc(0, 0, b.header, 16, kNext, 1);
  blk.desc(0, 1, b.data, 0x10000, kWrite | kNext, 2);
  blk.desc(0, 2, b.status, 1, kWrite);
  for (uint32_t r = 0; r < rounds; ++r) {
    for (uint32_t i = 0; i < 256; ++i) {
      s.write(blk.queue(0).avail + 4 + 2 * i, 0, 2);
    }
    blk.set_avail_idx(0, static_cast<uint16_t>(blk.queue(0).avail_idx + 256));
    blk.notify(0);
    blk.wait_used(0, 256);
  }
}

TEST(HostileBlock, RefusedRequestsAreAnsweredAndTheDiskStillServes) {
  HostileVm vm;
  run_batch(vm, "virtio-blk requests", [](Script& s, Drivers& d) { refused_requests(s, d.block); });
}

TEST(HostileBlock, FloodsResetsInFlightAndReadsIntoTheRings) {
  HostileVm vm;
  run_batch(vm, "virtio-blk floods and resets", [](Script& s, Drivers& d) {
    Driver& blk = d.block;
    blk.queue(0).size = 256;
    s.label("one chain published 1024 times");
    blk.init();
    same_chain_again_and_again(s, blk, 4);
    block_read(blk, 12);

    s.label("a reset with 256 reads of the whole disk in flight, then a read at once");
    blk.init();
    const BlockBuffers b = block_buffers(blk);
    // Their data goes to RAM of its own: a read in the kernel when the reset comes may
    // still land there.
    write_block_header(blk, kBlkIn, 0);
    blk.desc(0, 0, b.header, 16, kNext, 1);
    blk.desc(0, 1, kFloodBuffer, kDiskSectors * 512, kWrite | kNext, 2);
    blk.desc(0, 2, b.status, 1, kWrite);
    blk.set_avail_idx(0, 256);
    blk.notify(0);
    blk.write_reg(reg::kStatus, 0);
    blk.init();
    block_read(blk, 13);

    s.label("a read into the queue's own rings and descriptor table");
    blk.init();
    write_block_header(blk, kBlkIn, 0);
    blk.desc(0, 0, b.header, 16, kNext, 1);
    blk.desc(0, 1, blk.queue(0).desc, 0x3000, kWrite | kNext, 2);
    blk.desc(0, 2, b.status, 1, kWrite);
    blk.publish(0, 0);
    blk.notify(0);
    s.delay(200);  // the ring now holds the disk's bytes: nothing in it can be trusted
    blk.init();
    block_read(blk, 14);

    s.label("a write lands on the disk");
    s.fill(b.data, 0xab, 512);
    block_request(blk, kBlkOut, 9, 512, kBlkOk, 1);
  });
  // The write reached the file: sector 9 holds 0xab bytes.
  std::ifstream disk(vm.disk_path(), std::ios::binary);
  disk.seekg(9 * 512);
  std::vector<char> sector(512);
  disk.read(sector.data(), 512);
  EXPECT_EQ(std::count(sector.begin(), sector.end(), static_cast<char>(0xab)), 512);
}

}  // namespace
}  // namespace dsec::test::hostile
