#include "vmm/devices/legacy/i8042.h"

#include <algorithm>
#include <utility>

#include "vmm/devices/legacy/byte_registers.h"

namespace dsec::devices {
namespace {

constexpr uint64_t kDataPort = 0;     // 0x60
constexpr uint64_t kCommandPort = 4;  // 0x64

// Status register (read at 0x64); names as in Linux drivers/input/serio/i8042.h.
constexpr uint8_t kStatusOutputFull = 0x01;
constexpr uint8_t kStatusSystemFlag = 0x04;
constexpr uint8_t kStatusCommandData = 0x08;  // 1: the last write was to 0x64
constexpr uint8_t kStatusNotLocked = 0x10;    // 0 makes Linux warn "Keylock active"

// Control byte.
constexpr uint8_t kControlKbdInterrupt = 0x01;
constexpr uint8_t kControlSystemFlag = 0x04;
constexpr uint8_t kControlKbdDisabled = 0x10;
constexpr uint8_t kControlAuxDisabled = 0x20;
// What firmware leaves: keyboard interrupt on, POST passed.
constexpr uint8_t kControlDefault = kControlKbdInterrupt | kControlSystemFlag;

// Output port: reset line deasserted (it is active low), A20 enabled.
constexpr uint8_t kOutputPortReset = 0x01;
constexpr uint8_t kOutputPortDefault = 0x03;

// Controller commands.
constexpr uint8_t kCmdReadControl = 0x20;
constexpr uint8_t kCmdWriteControl = 0x60;
constexpr uint8_t kCmdAuxDisable = 0xa7;
constexpr uint8_t kCmdAuxEnable = 0xa8;
constexpr uint8_t kCmdAuxTest = 0xa9;
constexpr uint8_t kCmdSelfTest = 0xaa;
constexpr uint8_t kCmdKbdTest = 0xab;
constexpr uint8_t kCmdKbdDisable = 0xad;
constexpr uint8_t kCmdKbdEnable = 0xae;
constexpr uint8_t kCmdReadOutputPort = 0xd0;
constexpr uint8_t kCmdWriteOutputPort = 0xd1;
constexpr uint8_t kCmdWriteKbdBuffer = 0xd2;
constexpr uint8_t kCmdWriteAuxBuffer = 0xd3;  // Linux's I8042_CMD_AUX_LOOP
constexpr uint8_t kCmdWriteAux = 0xd4;
constexpr uint8_t kCmdPulseFirst = 0xf0;  // 0xf0-0xff pulse output port bits 0-3 whose
                                          // command bit is 0; bit 0 is the reset line

constexpr uint8_t kSelfTestPassed = 0x55;
constexpr uint8_t kInterfaceTestPassed = 0x00;
constexpr uint8_t kInterfaceClockStuckLow = 0x01;

}  // namespace

I8042::I8042(ResetHandler on_reset)
    : on_reset_(std::move(on_reset)), control_(kControlDefault), output_port_(kOutputPortDefault) {}

void I8042::read(uint64_t offset, std::span<uint8_t> data) {
  std::ranges::fill(data, uint8_t{0xff});
  const std::lock_guard lock(mutex_);
  for_each_register(offset, data.size(), kI8042RegisterCount,
                    [&](uint64_t reg, size_t i) { data[i] = read_register(reg); });
}

void I8042::write(uint64_t offset, std::span<const uint8_t> data) {
  size_t resets = 0;
  {
    const std::lock_guard lock(mutex_);
    for_each_register(offset, data.size(), kI8042RegisterCount, [&](uint64_t reg, size_t i) {
      if (write_register(reg, data[i])) {
        ++resets;
      }
    });
  }
  if (on_reset_) {
    for (size_t i = 0; i < resets; ++i) {
      on_reset_();
    }
  }
}

uint8_t I8042::status() const {
  uint8_t value = kStatusNotLocked;
  if (output_full_) {
    value |= kStatusOutputFull;
  }
  if ((control_ & kControlSystemFlag) != 0) {
    value |= kStatusSystemFlag;
  }
  if (last_write_was_command_) {
    value |= kStatusCommandData;
  }
  return value;
}

uint8_t I8042::read_register(uint64_t reg) {
  if (reg == kCommandPort) {
    return status();
  }
  if (reg == kDataPort) {
    // An empty buffer still reads its last byte, as the chip's does.
    output_full_ = false;
    return output_;
  }
  return 0xff;
}

bool I8042::write_register(uint64_t reg, uint8_t value) {
  if (reg == kCommandPort) {
    last_write_was_command_ = true;
    return run_command(value);
  }
  if (reg == kDataPort) {
    last_write_was_command_ = false;
    return take_parameter(value);
  }
  return false;
}

void I8042::respond(uint8_t byte) {
  output_ = byte;
  output_full_ = true;
}

bool I8042::run_command(uint8_t command) {
  pending_command_ = 0;  // a new command abandons one still waiting for its parameter
  switch (command) {
    case kCmdReadControl:
      respond(control_);
      break;
    case kCmdWriteControl:
    case kCmdWriteOutputPort:
    case kCmdWriteKbdBuffer:
    case kCmdWriteAuxBuffer:
    case kCmdWriteAux:
      pending_command_ = command;
      break;
    case kCmdAuxDisable:
      control_ |= kControlAuxDisabled;
      break;
    case kCmdAuxEnable:
      control_ &= static_cast<uint8_t>(~kControlAuxDisabled);
      break;
    case kCmdAuxTest:
      respond(kInterfaceClockStuckLow);  // no AUX port: see the header
      break;
    case kCmdSelfTest:
      respond(kSelfTestPassed);
      break;
    case kCmdKbdTest:
      respond(kInterfaceTestPassed);
      break;
    case kCmdKbdDisable:
      control_ |= kControlKbdDisabled;
      break;
    case kCmdKbdEnable:
      control_ &= static_cast<uint8_t>(~kControlKbdDisabled);
      break;
    case kCmdReadOutputPort:
      respond(output_port_);
      break;
    default:
      // Pulse commands: a 0 in bit 0 pulses the reset line. Other commands are ignored.
      return command >= kCmdPulseFirst && (command & kOutputPortReset) == 0;
  }
  return false;
}

bool I8042::take_parameter(uint8_t value) {
  const uint8_t command = std::exchange(pending_command_, 0);
  switch (command) {
    case kCmdWriteControl:
      control_ = value;
      return false;
    case kCmdWriteOutputPort:
      output_port_ = value;
      return (value & kOutputPortReset) == 0;
    case kCmdWriteKbdBuffer:
    case kCmdWriteAuxBuffer:
      // Both come back as keyboard data; for the AUX loopback that is the "no AUX" answer.
      respond(value);
      return false;
    default:
      // To the AUX device (0xd4) or, with no command pending, to the keyboard: none attached.
      return false;
  }
}

}  // namespace dsec::devices
