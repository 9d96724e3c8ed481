// The i8042 controller: the reset line behind `reboot=k`, what Linux's driver probes, and
// its keyboard: the answers Linux's atkbd driver waits for, and ctrl-alt-del typed on it,
// one IRQ 1 edge per byte.
#include "vmm/devices/legacy/i8042.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace dsec::devices {
namespace {

constexpr uint64_t kData = 0;     // port 0x60
constexpr uint64_t kCommand = 4;  // port 0x64
constexpr uint8_t kStatusObf = 0x01, kStatusIbf = 0x02, kStatusAuxData = 0x20,
                  kStatusCommand = 0x08, kStatusNotLocked = 0x10;

class I8042Test : public ::testing::Test {
 protected:
  uint8_t in(uint64_t reg) {
    uint8_t value = 0;
    i8042_.read(reg, std::span(&value, 1));
    return value;
  }
  void out(uint64_t reg, uint8_t value) { i8042_.write(reg, std::span(&value, 1)); }
  // Linux's i8042_command(): command, parameters, then results once OBF is set.
  std::vector<uint8_t> command(uint8_t cmd, const std::vector<uint8_t>& params, size_t results) {
    EXPECT_EQ(in(kCommand)&kStatusIbf, 0);
    out(kCommand, cmd);
    for (uint8_t p : params) {
      EXPECT_EQ(in(kCommand)&kStatusIbf, 0);
      out(kData, p);
    }
    std::vector<uint8_t> got;
    for (size_t i = 0; i < results; ++i) {
      EXPECT_EQ(in(kCommand)&kStatusObf, kStatusObf) << "no result for command " << int{cmd};
      got.push_back(in(kData));
    }
    return got;
  }

  // The bytes the keyboard has queued, read as Linux's interrupt handler does: one per
  // rising edge of IRQ 1.
  std::vector<uint8_t> keyboard_bytes() {
    std::vector<uint8_t> got;
    while (irq_) {
      const int edges = rising_edges_;
      got.push_back(in(kData));
      if (irq_ && rising_edges_ == edges) {
        ADD_FAILURE() << "IRQ 1 stayed high across a read: no edge for the next byte";
        break;
      }
    }
    EXPECT_EQ(in(kCommand)&kStatusObf, 0);
    return got;
  }

  int resets_ = 0;
  bool irq_ = false;
  int rising_edges_ = 0;
  I8042 i8042_{[this] { ++resets_; },
               [this](bool raised) {
                 rising_edges_ += (raised && !irq_) ? 1 : 0;
                 irq_ = raised;
               }};
};

TEST_F(I8042Test, PulsingTheResetLineCallsOnReset) {
  out(kCommand, 0xfe);  // what Linux's `reboot=k` sends
  EXPECT_EQ(resets_, 1);
  out(kCommand, 0xfe);  // Linux retries; each request is reported
  EXPECT_EQ(resets_, 2);
}

TEST_F(I8042Test, OtherCommandsAndDataDoNotReset) {
  for (uint8_t cmd :
       {0x20, 0xaa, 0xab, 0xad, 0xae, 0xa7, 0xa8, 0xa9, 0xd0, 0xff, 0xf1, 0xfd, 0xfb, 0x00, 0x01}) {
    out(kCommand, cmd);
  }
  out(kData, 0xfe);          // 0xfe to the data port goes to the (absent) keyboard
  command(0x60, {0xfe}, 0);  // as the control byte, 0xfe is just a value
  command(0xd1, {0x03}, 0);  // output port with the reset line high
  EXPECT_EQ(resets_, 0);
}

TEST_F(I8042Test, WritingTheOutputPortWithResetLowResets) {
  command(0xd1, {0xfe}, 0);
  EXPECT_EQ(resets_, 1);
}

TEST_F(I8042Test, WideWriteReachesTheCommandPortAtItsOffset) {
  const std::array<uint8_t, 4> wide{0xfe, 0xfe, 0xfe, 0xfe};  // ports 0x61-0x63 ignore theirs
  i8042_.write(1, wide);
  EXPECT_EQ(resets_, 1);
}

TEST_F(I8042Test, ResetHandlerMayUseTheDevice) {
  uint8_t status_seen = 0;
  I8042 device([&] { device.read(kCommand, std::span(&status_seen, 1)); });
  const uint8_t pulse = 0xfe;
  device.write(kCommand, std::span(&pulse, 1));  // would deadlock if called with the lock held
  EXPECT_EQ(status_seen & kStatusNotLocked, kStatusNotLocked);
}

TEST_F(I8042Test, StatusAtBootIsIdleUnlockedWithTheSystemFlag) {
  EXPECT_EQ(in(kCommand), kStatusNotLocked | 0x04);
  out(kCommand, 0xad);
  EXPECT_EQ(in(kCommand)&kStatusCommand, kStatusCommand);
}

TEST_F(I8042Test, ControlByteReadsAndWritesBack) {
  EXPECT_THAT(command(0x20, {}, 1), ::testing::ElementsAre(0x05));
  EXPECT_EQ(in(kCommand)&kStatusObf, 0);  // read once, the buffer is empty
  command(0x60, {0x47}, 0);
  EXPECT_EQ(in(kCommand)&kStatusCommand, 0);  // the last write was data
  EXPECT_THAT(command(0x20, {}, 1), ::testing::ElementsAre(0x47));
  command(0xad, {}, 0);  // disable keyboard: sets control bit 4
  command(0xa8, {}, 0);  // enable AUX: clears control bit 5
  EXPECT_THAT(command(0x20, {}, 1), ::testing::ElementsAre((0x47 | 0x10) & ~0x20));
}

TEST_F(I8042Test, SelfTestsPass) {
  EXPECT_THAT(command(0xaa, {}, 1), ::testing::ElementsAre(0x55));
  EXPECT_THAT(command(0xab, {}, 1), ::testing::ElementsAre(0x00));
  EXPECT_THAT(command(0xd0, {}, 1), ::testing::ElementsAre(0x03));
  EXPECT_THAT(command(0xd2, {0x42}, 1), ::testing::ElementsAre(0x42));
}

// Linux's i8042_check_aux(): the AUX loopback must fail without a timeout, and the AUX
// interface test must then say the port is unusable (neither 0x00, 0xfa nor 0xff).
TEST_F(I8042Test, LinuxAuxProbeFindsNoAuxPortWithoutWaiting) {
  out(kCommand, 0xd3);
  out(kData, 0x5a);
  ASSERT_EQ(in(kCommand)&kStatusObf, kStatusObf);  // answered at once...
  EXPECT_EQ(in(kCommand)&kStatusAuxData, 0);       // ...but not from an AUX device
  const auto test = command(0xa9, {}, 1);          // Linux does not read the loopback byte first
  ASSERT_EQ(test.size(), 1u);
  EXPECT_NE(test[0], 0x00);
  EXPECT_NE(test[0], 0xfa);
  EXPECT_NE(test[0], 0xff);
}

TEST_F(I8042Test, NewCommandAbandonsAPendingParameter) {
  out(kCommand, 0x60);  // wants the control byte next...
  out(kCommand, 0xaa);  // ...but a new command comes instead
  EXPECT_EQ(in(kData), 0x55);
  out(kData, 0x00);  // now a keyboard byte, not the control byte
  EXPECT_THAT(command(0x20, {}, 1), ::testing::ElementsAre(0x05));
}

TEST_F(I8042Test, AnyOffsetAndSizeIsSafe) {
  std::mt19937_64 random(7);
  std::vector<uint8_t> buffer(16);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t offset = (i % 10 == 0) ? ~uint64_t{0} - random() % 4 : random() % 6;
    const size_t size = random() % (buffer.size() + 1);
    for (auto& byte : buffer) {
      byte = static_cast<uint8_t>(random() | 0x01);  // bit 0 set: never a reset
    }
    if (random() % 2 == 0) {
      i8042_.write(offset, std::span(buffer).first(size));
    } else {
      i8042_.read(offset, std::span(buffer).first(size));
    }
  }
  EXPECT_EQ(resets_, 0);
  EXPECT_EQ(in(kCommand)&kStatusIbf, 0);
  std::array<uint8_t, 3> unused{};
  i8042_.read(1, unused);  // ports 0x61-0x63
  EXPECT_THAT(unused, ::testing::ElementsAre(0xff, 0xff, 0xff));
}

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// What Linux's atkbd driver sends at probe (get ID, reset-and-disable, LEDs, repeat rate,
// enable) is answered at once, each byte with an IRQ 1 edge: no probe runs into a timeout.
TEST_F(I8042Test, TheKeyboardAnswersWhatAtkbdAsks) {
  out(kData, 0xf2);  // get ID
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0xfa, 0xab, 0x83));
  out(kData, 0xf5);  // reset and disable
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0xfa));
  out(kData, 0xed);  // LEDs...
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0xfa));
  out(kData, 0xf2);  // ...whose parameter is not a command, whatever its value
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0xfa));
  out(kData, 0xf0);  // scan set: which one?
  out(kData, 0x00);
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0xfa, 0xfa, 0x02));
  out(kData, 0xff);  // reset
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0xfa, 0xaa));
  out(kData, 0xee);  // echo
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0xee));
  EXPECT_EQ(resets_, 0);
}

TEST_F(I8042Test, CtrlAltDelIsTypedAsScanCodeSet2MakeCodesOneEdgePerByte) {
  ASSERT_TRUE(i8042_.send_ctrl_alt_del().has_value());
  EXPECT_TRUE(irq_);
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0x14, 0x11, 0xe0, 0x71));
  EXPECT_EQ(rising_edges_, 4);
  EXPECT_FALSE(irq_);
  EXPECT_EQ(resets_, 0) << "the guest reboots, not the controller";
}

TEST_F(I8042Test, ControllerAnswersRaiseNoInterrupt) {
  EXPECT_THAT(command(0x20, {}, 1), ElementsAre(0x05));
  EXPECT_THAT(command(0xaa, {}, 1), ElementsAre(0x55));
  EXPECT_EQ(rising_edges_, 0);
}

TEST_F(I8042Test, CtrlAltDelIsRefusedWhenTheGuestDoesNotListen) {
  command(0x60, {0x04}, 0);  // keyboard interrupt off
  const auto off = i8042_.send_ctrl_alt_del();
  ASSERT_FALSE(off.has_value());
  EXPECT_THAT(off.error().message(), ::testing::HasSubstr("turned its keyboard off"));
  command(0x60, {0x05 | 0x10}, 0);  // interrupt on, keyboard interface disabled
  EXPECT_FALSE(i8042_.send_ctrl_alt_del().has_value());
  EXPECT_EQ(in(kCommand)&kStatusObf, 0) << "nothing was typed";
  EXPECT_EQ(rising_edges_, 0);
  // Listening again: the keys are typed and delivered.
  command(0x60, {0x05}, 0);
  ASSERT_TRUE(i8042_.send_ctrl_alt_del().has_value());
  EXPECT_THAT(keyboard_bytes(), ElementsAre(0x14, 0x11, 0xe0, 0x71));
}

TEST_F(I8042Test, KeysTheGuestDoesNotReadDoNotPileUp) {
  for (size_t i = 0; i < I8042::kKeyboardQueueSize / 4; ++i) {
    ASSERT_TRUE(i8042_.send_ctrl_alt_del().has_value()) << i;
  }
  const auto full = i8042_.send_ctrl_alt_del();
  ASSERT_FALSE(full.has_value());
  EXPECT_THAT(full.error().message(), ::testing::HasSubstr("has not read the keys"));
  // A guest that writes to its keyboard and never reads is bounded too.
  for (int i = 0; i < 1000; ++i) {
    out(kData, 0xf2);
  }
  EXPECT_EQ(keyboard_bytes().size(), I8042::kKeyboardQueueSize);
  EXPECT_THAT(keyboard_bytes(), IsEmpty());
}

}  // namespace
}  // namespace dsec::devices
