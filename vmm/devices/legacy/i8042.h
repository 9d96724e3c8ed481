// The i8042 keyboard controller at ports 0x60 (data) and 0x64 (status/command), with no
// keyboard or mouse behind it. It exists for two reasons: Linux's i8042 driver probes it at
// boot, and `reboot=k` ends the guest by pulsing the CPU reset line through it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>

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
// - No keyboard is attached: bytes written to it are dropped, and the controller raises no
//   IRQ 1 or 12.
// - Status: keyboard not locked, system flag as the control byte sets it, command/data as
//   the last write was.
// - Reset: a pulse command (0xf0-0xff) whose bit 0 is clear (0xfe is the one Linux's
//   `reboot=k` sends), or a write of the output port with bit 0 clear, asserts the CPU reset
//   line and calls on_reset. It is called without the controller's lock held, once per
//   request: a guest retries (Linux sends 0xfe up to ten times), so the handler must be
//   idempotent. The machine ends the VM.
// Thread-safe: vCPU threads may access it concurrently.
class I8042 final : public BusDevice {
 public:
  using ResetHandler = std::function<void()>;

  explicit I8042(ResetHandler on_reset);

  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;

 private:
  // With mutex_ held. Return true when the guest asked for a CPU reset.
  uint8_t read_register(uint64_t reg);
  bool write_register(uint64_t reg, uint8_t value);
  bool run_command(uint8_t command);
  bool take_parameter(uint8_t value);
  void respond(uint8_t byte);
  uint8_t status() const;

  std::mutex mutex_;
  const ResetHandler on_reset_;
  uint8_t control_;      // the "command byte" (CTR)
  uint8_t output_port_;  // P2: bit 0 is the CPU reset line (active low), bit 1 is A20
  uint8_t output_ = 0;   // the output buffer, read at port 0x60
  bool output_full_ = false;
  uint8_t pending_command_ = 0;  // a command waiting for its parameter at port 0x60, or 0
  bool last_write_was_command_ = false;
};

}  // namespace dsec::devices
