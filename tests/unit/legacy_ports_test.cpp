// The small legacy devices that only keep Linux's boot quiet: CMOS RAM and the null port.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <span>

#include "vmm/devices/legacy/cmos.h"
#include "vmm/devices/legacy/null_device.h"

namespace dsec::devices {
namespace {

using ::testing::ElementsAre;

constexpr uint64_t kIndex = 0;  // port 0x70
constexpr uint64_t kData = 1;   // port 0x71

uint8_t cmos_read(Cmos& cmos, uint8_t index) {
  cmos.write(kIndex, std::span(&index, 1));
  uint8_t value = 0;
  cmos.read(kData, std::span(&value, 1));
  return value;
}
void cmos_write(Cmos& cmos, uint8_t index, uint8_t value) {
  const std::array<uint8_t, 2> index_then_value{index, value};
  cmos.write(kIndex, index_then_value);  // a 16-bit OUT to 0x70 writes 0x70 then 0x71
}

// Linux's smpboot writes the shutdown status byte (0x0f) around each AP start.
TEST(Cmos, RamKeepsWhatTheGuestWrites) {
  Cmos cmos;
  EXPECT_EQ(cmos_read(cmos, 0x0f), 0x00);
  cmos_write(cmos, 0x0f, 0x0a);
  EXPECT_EQ(cmos_read(cmos, 0x0f), 0x0a);
  cmos_write(cmos, 0x7f, 0x99);
  EXPECT_EQ(cmos_read(cmos, 0xff), 0x99);  // bit 7 of the index is the NMI mask, not an address
}

TEST(Cmos, StatusRegistersSayValidAndIdle) {
  Cmos cmos;
  EXPECT_EQ(cmos_read(cmos, 0x0a) & 0x80, 0);  // no update in progress
  EXPECT_EQ(cmos_read(cmos, 0x0d), 0x80);      // RAM and time valid
  cmos_write(cmos, 0x0a, 0xff);
  EXPECT_EQ(cmos_read(cmos, 0x0a), 0x7f);  // UIP is read-only
  cmos_write(cmos, 0x0c, 0xff);
  cmos_write(cmos, 0x0d, 0x00);
  EXPECT_EQ(cmos_read(cmos, 0x0c), 0x00);  // C and D are read-only
  EXPECT_EQ(cmos_read(cmos, 0x0d), 0x80);
}

TEST(Cmos, IndexPortIsWriteOnlyAndOutOfRangeBytesReadAllOnes) {
  Cmos cmos;
  std::array<uint8_t, 4> in{};
  cmos.read(kIndex, in);
  EXPECT_THAT(in, ElementsAre(0xff, 0x00, 0xff, 0xff));  // index port, data (RAM[0]), nothing
  cmos.read(~uint64_t{0}, in);
  EXPECT_THAT(in, ElementsAre(0xff, 0xff, 0xff, 0xff));
}

TEST(NullDevice, ReadsAllOnesAndIgnoresWrites) {
  NullDevice post_code;
  const std::array<uint8_t, 1> out{0x42};
  post_code.write(0, out);
  std::array<uint8_t, 2> in{};
  post_code.read(0, in);
  EXPECT_THAT(in, ElementsAre(0xff, 0xff));
}

}  // namespace
}  // namespace dsec::devices
