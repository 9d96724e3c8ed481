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

// The keyboard's commands and answers (Linux's drivers/input/keyboard/atkbd.c).
constexpr uint8_t kKbdSetLeds = 0xed;    // + a parameter
constexpr uint8_t kKbdEcho = 0xee;       // answered with itself, no acknowledgement
constexpr uint8_t kKbdScanSet = 0xf0;    // + a parameter; 0 asks for the current set
constexpr uint8_t kKbdGetId = 0xf2;      // answered with the ID after the acknowledgement
constexpr uint8_t kKbdSetRepeat = 0xf3;  // + a parameter
constexpr uint8_t kKbdReset = 0xff;      // answered with the self test's result
constexpr uint8_t kKbdAck = 0xfa;
constexpr uint8_t kKbdSelfTestPassed = 0xaa;
constexpr uint8_t kKbdIdFirst = 0xab;  // an MF2 keyboard
constexpr uint8_t kKbdIdSecond = 0x83;
constexpr uint8_t kKbdScanSet2 = 0x02;

// Scan code set 2 make codes: left ctrl, left alt, delete (an extended key).
constexpr uint8_t kKeyCtrl = 0x14;
constexpr uint8_t kKeyAlt = 0x11;
constexpr uint8_t kKeyExtended = 0xe0;
constexpr uint8_t kKeyDelete = 0x71;

}  // namespace

I8042::I8042(ResetHandler on_reset, InterruptLine keyboard_irq)
    : on_reset_(std::move(on_reset)),
      keyboard_irq_(std::move(keyboard_irq)),
      control_(kControlDefault),
      output_port_(kOutputPortDefault) {}

Status I8042::send_ctrl_alt_del() {
  const std::lock_guard lock(mutex_);
  if ((control_ & kControlKbdDisabled) != 0 || (control_ & kControlKbdInterrupt) == 0) {
    return fail(
        "the guest has turned its keyboard off (the i8042's keyboard interface or interrupt is "
        "disabled): it would not see ctrl-alt-del");
  }
  if (!keyboard_send({kKeyCtrl, kKeyAlt, kKeyExtended, kKeyDelete})) {
    return fail("the guest has not read the keys typed before yet: try again later");
  }
  return ok();
}

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
  if (!output_.empty()) {
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
    if (!output_.empty()) {
      last_output_ = output_.front();
      output_.pop_front();
      // What is left came from the keyboard (a controller answer replaces the buffer).
      from_keyboard_ = !output_.empty();
      // Each keyboard byte is an edge of IRQ 1: low once read, high for the next.
      if (irq_raised_ && keyboard_irq_) {
        keyboard_irq_(false);
      }
      irq_raised_ = false;
      update_irq();
    }
    return last_output_;
  }
  return 0xff;
}

void I8042::update_irq() {
  const bool level = !output_.empty() && from_keyboard_ && (control_ & kControlKbdInterrupt) != 0;
  if (level != irq_raised_) {
    irq_raised_ = level;
    if (keyboard_irq_) {
      keyboard_irq_(level);
    }
  }
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
  output_.assign(1, byte);
  from_keyboard_ = false;
  update_irq();
}

bool I8042::keyboard_send(std::initializer_list<uint8_t> bytes) {
  if (output_.size() + bytes.size() > kKeyboardQueueSize) {
    return false;  // a guest that does not read its keyboard loses its answers
  }
  if (output_.empty()) {
    from_keyboard_ = true;
  }
  output_.insert(output_.end(), bytes);
  update_irq();
  return true;
}

void I8042::keyboard_receive(uint8_t byte) {
  if (std::exchange(keyboard_parameter_pending_, false)) {
    // The parameter of the command before: LEDs, repeat rate, scan set.
    keyboard_send({kKbdAck});
    if (std::exchange(keyboard_scan_set_query_, false) && byte == 0) {
      keyboard_send({kKbdScanSet2});
    }
    return;
  }
  switch (byte) {
    case kKbdEcho:
      keyboard_send({kKbdEcho});
      return;
    case kKbdGetId:
      keyboard_send({kKbdAck, kKbdIdFirst, kKbdIdSecond});
      return;
    case kKbdReset:
      keyboard_send({kKbdAck, kKbdSelfTestPassed});
      return;
    case kKbdSetLeds:
    case kKbdSetRepeat:
    case kKbdScanSet:
      keyboard_parameter_pending_ = true;
      keyboard_scan_set_query_ = byte == kKbdScanSet;
      keyboard_send({kKbdAck});
      return;
    default:
      // Enable, disable, defaults, typematic modes...: acknowledged, nothing to keep.
      keyboard_send({kKbdAck});
      return;
  }
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
      update_irq();
      return false;
    case kCmdWriteOutputPort:
      output_port_ = value;
      return (value & kOutputPortReset) == 0;
    case kCmdWriteKbdBuffer:
    case kCmdWriteAuxBuffer:
      // Both come back as keyboard data; for the AUX loopback that is the "no AUX" answer.
      respond(value);
      return false;
    case kCmdWriteAux:
      return false;  // to the AUX device: none attached
    default:
      keyboard_receive(value);  // no command pending: to the keyboard
      return false;
  }
}

}  // namespace dsec::devices
