// A 16550A UART as Linux's 8250 driver sees it: COM1 at port 0x3f8, IRQ 4.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/bus_device.h"

namespace dsec::devices {

inline constexpr uint16_t kCom1Port = 0x3f8;
inline constexpr uint32_t kCom1Irq = 4;
inline constexpr uint64_t kSerialRegisterCount = 8;  // map it at [port, port + 8)

// What the guest sees:
// - Transmission is instantaneous: every THR byte goes to the output sink at once, and LSR
//   always shows THRE and TEMT.
// - Received bytes wait in a bounded FIFO (64 bytes by default); LSR.DR says it is not empty.
//   The receive interrupt fires while it holds at least one byte (trigger level 1, so there is
//   no character-timeout interrupt).
// - IIR reports the highest-priority enabled cause: received data (0x04) before THR empty
//   (0x02) before modem status (0x00); 0x01 means none. Its top bits show the FIFO enable, so
//   Linux's autoconfig identifies a 16550A. As on a real 16550, the THR-empty interrupt is
//   raised when IER enables it while THR is empty and after each THR write, and cleared by
//   reading IIR while it is the cause reported.
// - MCR loopback: THR bytes come back as received data instead of leaving, and MSR reflects
//   MCR (RTS->CTS, DTR->DSR, OUT1->RI, OUT2->DCD), which Linux's probe checks. Out of
//   loopback, MSR shows a ready terminal (CTS, DSR, DCD). Changes set MSR's delta bits.
// - The divisor latch (DLL/DLM behind LCR.DLAB), LCR, SCR and the FIFO control bits are kept
//   but have no effect on timing; there is no baud rate, parity or line error.
// Wider accesses are split into byte accesses at consecutive registers, as an ISA bus does.
//
// Thread-safe: vCPU threads access registers while a host thread enqueues input. The output
// sink and the interrupt line are called with the UART's lock held, so that bytes and
// interrupt levels leave in order: they must not call back into this Serial.
class Serial final : public BusDevice {
 public:
  // Receives what the guest transmits, in order. A callback, so the caller picks the
  // destination (the console thread's buffer: machine/console.h; a buffer in tests).
  using OutputSink = std::function<void(std::span<const uint8_t>)>;
  // The UART's interrupt output, called with the new level each time it changes (true =
  // raised). An edge-triggered consumer (an irqfd) injects the interrupt on each rising edge;
  // KVM_IRQ_LINE takes the level as it is.
  using InterruptLine = std::function<void(bool raised)>;

  static constexpr size_t kDefaultInputCapacity = 64;

  // Either callback may be empty: output is then dropped, interrupts are not signalled.
  // input_capacity is the receive FIFO's bound, at least 1.
  Serial(OutputSink output, InterruptLine interrupt, size_t input_capacity = kDefaultInputCapacity);

  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;

  // Host to guest: appends bytes to the receive FIFO and returns how many fit; the rest are
  // not taken (the caller may retry after the guest has read, or drop them).
  size_t enqueue_input(std::span<const uint8_t> bytes);
  // Free space in the receive FIFO, for a host reader that reads only what fits.
  size_t input_space() const;
  // The interrupt output's current level.
  bool interrupt_raised() const;

  // Snapshots: the registers the guest's driver set (not the received bytes, which are
  // the host's console input). restore_state() takes bytes from a state file: checked.
  std::vector<uint8_t> save_state() const;
  Status restore_state(std::span<const uint8_t> bytes);

 private:
  // All private members below run with mutex_ held.
  uint8_t read_register(uint64_t reg);
  void write_register(uint64_t reg, uint8_t value);
  void transmit(uint8_t byte);
  void set_modem_control(uint8_t value);
  uint8_t interrupt_identification() const;
  uint8_t modem_status_lines() const;
  bool dlab() const;
  void update_interrupt();

  mutable std::mutex mutex_;
  const OutputSink output_;
  const InterruptLine interrupt_;
  const size_t input_capacity_;
  std::deque<uint8_t> input_;  // received bytes, oldest first; never above input_capacity_

  uint8_t ier_ = 0;
  uint8_t lcr_;
  uint8_t mcr_;
  uint8_t scr_ = 0;
  uint8_t dll_;
  uint8_t dlm_ = 0;
  uint8_t msr_deltas_ = 0;  // MSR bits 0-3, cleared by reading MSR
  bool fifo_enabled_ = false;
  bool thr_empty_pending_ = false;  // the THR-empty interrupt's latch
  bool interrupt_raised_ = false;
};

}  // namespace dsec::devices
