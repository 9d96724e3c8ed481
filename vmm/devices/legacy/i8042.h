// The i8042 keyboard controller at ports 0x60 (data) and 0x64 (status/command), with a
// keyboard behind it and no mouse. It exists for three reasons: Linux's i8042 driver probes
// it at boot, `reboot=k` ends the guest by pulsing the CPU reset line through it, and the
// VMM types ctrl-alt-del on its keyboard (Firecracker's SendCtrlAltDel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <span>

#include "vmm/common/error.h"
#include "vmm/devices/bus_device.h"

namespace dsec::devices {

// Map it at [0x60, 0x65): offset 0 is the data port, offset 4 the status/command port.
// Offsets 1-3 read as all-ones and ignore writes. Port 0x61 among them is the PC speaker
// port, which KVM's in-kernel PIT serves when created with KVM_PIT_SPEAKER_DUMMY; without
// that flag its accesses land here and are absorbed.
inline constexpr uint16_t kI8042Port = 0x60;
inline constexpr uint64_t kI8042RegisterCount = 5;

// What Linux sees:
// - Controller commands answer at once through the output buffer (status OBF), never
//   leaving the input buffer busy (IBF), so no driver wait runs into its timeout: read and
//   write the control byte (0x20, 0x60), self test (0xaa -> 0x55), keyboard interface test
//   (0xab -> 0), enable and disable of each interface (bits in the control byte), read and
//   write the output port (0xd0, 0xd1), write the keyboard output buffer (0xd2).
// - There is no AUX (mouse) port. Linux's probe tests it with the AUX loopback command
//   (0xd3); that byte comes back marked as keyboard data, which fails the test at once
//   instead of after the driver's 500 ms timeout, and the AUX interface test (0xa9) answers
//   "clock line stuck", so the driver registers no AUX port and logs no error. Booting with
//   `i8042.noaux` skips both.
// - A PS/2 keyboard is attached that answers what Linux's atkbd driver asks at once: every
//   byte sent to it is acknowledged (0xfa), "get ID" then answers 0xab 0x83 (an MF2
//   keyboard), "reset" 0xaa (self test passed), "echo" 0xee. At most kKeyboardQueueSize
//   of its bytes wait (more are dropped); each raises IRQ 1 while the control byte enables
//   the keyboard interrupt. Controller answers replace whatever waits and raise no IRQ.
//   There is no IRQ 12.
// - send_ctrl_alt_del() types ctrl, alt and delete (scan code set 2, make codes only, as
//   Firecracker does): a guest whose kernel has the atkbd driver and the VT layer reboots,
//   or signals its init, which decides.
// - Status: keyboard not locked, system flag as the control byte sets it, command/data as
//   the last write was.
// - Reset: a pulse command (0xf0-0xff) whose bit 0 is clear (0xfe is the one Linux's
//   `reboot=k` sends), or a write of the output port with bit 0 clear, asserts the CPU reset
//   line and calls on_reset. It is called without the controller's lock held, once per
//   request: a guest retries (Linux sends 0xfe up to ten times), so the handler must be
//   idempotent. The machine ends the VM.
// Thread-safe: vCPU threads and the API's thread may access it concurrently.
class I8042 final : public BusDevice {
 public:
  using ResetHandler = std::function<void()>;
  // Sets the level of IRQ 1; called with the controller's lock held, so it must not call
  // back into the device. Each keyboard byte is an edge: low when the guest reads one,
  // high again when another waits.
  using InterruptLine = std::function<void(bool raised)>;

  static constexpr size_t kKeyboardQueueSize = 16;

  explicit I8042(ResetHandler on_reset, InterruptLine keyboard_irq = nullptr);

  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;

  // Types ctrl-alt-del on the keyboard. Fails, typing nothing, when the guest turned its
  // keyboard interface or interrupt off (it does not listen), or has not read the keys of
  // an earlier call.
  Status send_ctrl_alt_del();

 private:
  // With mutex_ held. Return true when the guest asked for a CPU reset.
  uint8_t read_register(uint64_t reg);
  bool write_register(uint64_t reg, uint8_t value);
  bool run_command(uint8_t command);
  bool take_parameter(uint8_t value);
  void keyboard_receive(uint8_t byte);
  // A controller answer: replaces whatever waits in the output buffer.
  void respond(uint8_t byte);
  // A keyboard byte: waits behind the others, and raises IRQ 1.
  bool keyboard_send(std::initializer_list<uint8_t> bytes);
  // Sets IRQ 1 to whether a keyboard byte waits and the guest enabled its interrupt.
  void update_irq();
  uint8_t status() const;

  std::mutex mutex_;
  const ResetHandler on_reset_;
  const InterruptLine keyboard_irq_;
  uint8_t control_;      // the "command byte" (CTR)
  uint8_t output_port_;  // P2: bit 0 is the CPU reset line (active low), bit 1 is A20
  // What port 0x60 reads: the front byte, then the rest in order. `from_keyboard_` says
  // whether the front came from the keyboard (and so raises IRQ 1).
  std::deque<uint8_t> output_;
  bool from_keyboard_ = false;
  uint8_t last_output_ = 0;  // an empty buffer still reads its last byte, as the chip's does
  bool irq_raised_ = false;
  uint8_t pending_command_ = 0;  // a command waiting for its parameter at port 0x60, or 0
  bool last_write_was_command_ = false;
  // The keyboard waits for a command's parameter (the scan-set command's may be a query).
  bool keyboard_parameter_pending_ = false;
  bool keyboard_scan_set_query_ = false;
};

}  // namespace dsec::devices
