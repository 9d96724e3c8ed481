#include "vmm/devices/legacy/serial.h"

#include <algorithm>
#include <array>
#include <utility>

#include "vmm/devices/legacy/byte_registers.h"
#include "vmm/snapshot/byte_codec.h"

namespace dsec::devices {
namespace {

// Register offsets (16550A datasheet; Linux include/uapi/linux/serial_reg.h).
constexpr uint64_t kData = 0;  // RBR (read) / THR (write); DLL with DLAB
constexpr uint64_t kIer = 1;   // DLM with DLAB
constexpr uint64_t kIir = 2;   // IIR (read) / FCR (write)
constexpr uint64_t kLcr = 3;
constexpr uint64_t kMcr = 4;
constexpr uint64_t kLsr = 5;
constexpr uint64_t kMsr = 6;
constexpr uint64_t kScr = 7;

constexpr uint8_t kIerReceivedData = 0x01;
constexpr uint8_t kIerThrEmpty = 0x02;
constexpr uint8_t kIerModemStatus = 0x08;
// Only the four standard enables exist; Linux's probe checks that bits 4-7 (XScale UUE and
// friends) do not stick.
constexpr uint8_t kIerMask = 0x0f;

constexpr uint8_t kIirNone = 0x01;
constexpr uint8_t kIirModemStatus = 0x00;
constexpr uint8_t kIirThrEmpty = 0x02;
constexpr uint8_t kIirReceivedData = 0x04;
constexpr uint8_t kIirFifoEnabled = 0xc0;  // what makes Linux's autoconfig say 16550A

constexpr uint8_t kFcrEnableFifo = 0x01;
constexpr uint8_t kFcrClearReceiver = 0x02;

constexpr uint8_t kLcrDlab = 0x80;
constexpr uint8_t kLcrDefault = 0x03;  // 8 data bits, 1 stop bit, no parity

constexpr uint8_t kMcrDtr = 0x01;
constexpr uint8_t kMcrRts = 0x02;
constexpr uint8_t kMcrOut1 = 0x04;
constexpr uint8_t kMcrOut2 = 0x08;
constexpr uint8_t kMcrLoop = 0x10;
constexpr uint8_t kMcrMask = 0x1f;  // bits 5-7 are not implemented on a 16550A
constexpr uint8_t kMcrDefault = kMcrOut2;

constexpr uint8_t kLsrDataReady = 0x01;
constexpr uint8_t kLsrThrEmpty = 0x20;
constexpr uint8_t kLsrTransmitterEmpty = 0x40;

constexpr uint8_t kMsrDeltaCts = 0x01;
constexpr uint8_t kMsrDeltaDsr = 0x02;
constexpr uint8_t kMsrTrailingEdgeRi = 0x04;
constexpr uint8_t kMsrDeltaDcd = 0x08;
constexpr uint8_t kMsrCts = 0x10;
constexpr uint8_t kMsrDsr = 0x20;
constexpr uint8_t kMsrRi = 0x40;
constexpr uint8_t kMsrDcd = 0x80;

// 115200 / 12 = 9600 baud, what firmware usually leaves behind.
constexpr uint8_t kDivisorLowDefault = 12;

}  // namespace

Serial::Serial(OutputSink output, InterruptLine interrupt, size_t input_capacity)
    : output_(std::move(output)),
      interrupt_(std::move(interrupt)),
      input_capacity_(std::max<size_t>(input_capacity, 1)),
      lcr_(kLcrDefault),
      mcr_(kMcrDefault),
      dll_(kDivisorLowDefault) {}

void Serial::read(uint64_t offset, std::span<uint8_t> data) {
  std::ranges::fill(data, uint8_t{0xff});
  const std::lock_guard lock(mutex_);
  for_each_register(offset, data.size(), kSerialRegisterCount,
                    [&](uint64_t reg, size_t i) { data[i] = read_register(reg); });
}

void Serial::write(uint64_t offset, std::span<const uint8_t> data) {
  const std::lock_guard lock(mutex_);
  for_each_register(offset, data.size(), kSerialRegisterCount,
                    [&](uint64_t reg, size_t i) { write_register(reg, data[i]); });
}

size_t Serial::enqueue_input(std::span<const uint8_t> bytes) {
  const std::lock_guard lock(mutex_);
  const size_t taken = std::min(bytes.size(), input_capacity_ - input_.size());
  input_.insert(input_.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(taken));
  update_interrupt();
  return taken;
}

size_t Serial::input_space() const {
  const std::lock_guard lock(mutex_);
  return input_capacity_ - input_.size();
}

bool Serial::interrupt_raised() const {
  const std::lock_guard lock(mutex_);
  return interrupt_raised_;
}

bool Serial::dlab() const {
  return (lcr_ & kLcrDlab) != 0;
}

uint8_t Serial::read_register(uint64_t reg) {
  switch (reg) {
    case kData: {
      if (dlab()) {
        return dll_;
      }
      if (input_.empty()) {
        return 0;
      }
      const uint8_t byte = input_.front();
      input_.pop_front();
      update_interrupt();
      return byte;
    }
    case kIer:
      return dlab() ? dlm_ : ier_;
    case kIir: {
      const uint8_t id = interrupt_identification();
      // Reading IIR while it reports THR empty acknowledges that interrupt (16550A).
      if (id == kIirThrEmpty) {
        thr_empty_pending_ = false;
        update_interrupt();
      }
      return id | (fifo_enabled_ ? kIirFifoEnabled : 0);
    }
    case kLcr:
      return lcr_;
    case kMcr:
      return mcr_;
    case kLsr:
      return kLsrThrEmpty | kLsrTransmitterEmpty | (input_.empty() ? 0 : kLsrDataReady);
    case kMsr: {
      const uint8_t value = modem_status_lines() | msr_deltas_;
      msr_deltas_ = 0;
      update_interrupt();
      return value;
    }
    case kScr:
      return scr_;
    default:
      return 0xff;
  }
}

void Serial::write_register(uint64_t reg, uint8_t value) {
  switch (reg) {
    case kData:
      if (dlab()) {
        dll_ = value;
      } else {
        transmit(value);
      }
      break;
    case kIer:
      if (dlab()) {
        dlm_ = value;
      } else {
        const uint8_t before = ier_;
        ier_ = value & kIerMask;
        // Enabling the THR-empty interrupt while THR is empty (it always is) raises it;
        // Linux's startup checks this before trusting THRE interrupts.
        if ((before & kIerThrEmpty) == 0 && (ier_ & kIerThrEmpty) != 0) {
          thr_empty_pending_ = true;
        }
        update_interrupt();
      }
      break;
    case kIir:  // FCR
      fifo_enabled_ = (value & kFcrEnableFifo) != 0;
      if ((value & kFcrClearReceiver) != 0) {
        input_.clear();
        update_interrupt();
      }
      break;
    case kLcr:
      lcr_ = value;
      break;
    case kMcr:
      set_modem_control(value);
      break;
    case kScr:
      scr_ = value;
      break;
    default:  // LSR and MSR are read-only (writes are for factory tests)
      break;
  }
}

void Serial::transmit(uint8_t byte) {
  if ((mcr_ & kMcrLoop) != 0) {
    // Loopback: the transmitter feeds the receiver; nothing leaves the UART.
    if (input_.size() < input_capacity_) {
      input_.push_back(byte);
    }
  } else if (output_) {
    output_(std::span<const uint8_t>(&byte, 1));
  }
  // The byte left THR at once, so THR is empty again: the THR-empty interrupt comes back.
  thr_empty_pending_ = true;
  update_interrupt();
}

void Serial::set_modem_control(uint8_t value) {
  const uint8_t before = modem_status_lines();
  mcr_ = value & kMcrMask;
  const uint8_t after = modem_status_lines();
  const uint8_t changed = before ^ after;
  if ((changed & kMsrCts) != 0) {
    msr_deltas_ |= kMsrDeltaCts;
  }
  if ((changed & kMsrDsr) != 0) {
    msr_deltas_ |= kMsrDeltaDsr;
  }
  if ((before & kMsrRi) != 0 && (after & kMsrRi) == 0) {
    msr_deltas_ |= kMsrTrailingEdgeRi;
  }
  if ((changed & kMsrDcd) != 0) {
    msr_deltas_ |= kMsrDeltaDcd;
  }
  update_interrupt();
}

uint8_t Serial::modem_status_lines() const {
  if ((mcr_ & kMcrLoop) == 0) {
    return kMsrCts | kMsrDsr | kMsrDcd;
  }
  uint8_t lines = 0;
  if ((mcr_ & kMcrRts) != 0) {
    lines |= kMsrCts;
  }
  if ((mcr_ & kMcrDtr) != 0) {
    lines |= kMsrDsr;
  }
  if ((mcr_ & kMcrOut1) != 0) {
    lines |= kMsrRi;
  }
  if ((mcr_ & kMcrOut2) != 0) {
    lines |= kMsrDcd;
  }
  return lines;
}

uint8_t Serial::interrupt_identification() const {
  // Priority order of the 16550A; receiver line status (0x06) never occurs here.
  if ((ier_ & kIerReceivedData) != 0 && !input_.empty()) {
    return kIirReceivedData;
  }
  if ((ier_ & kIerThrEmpty) != 0 && thr_empty_pending_) {
    return kIirThrEmpty;
  }
  if ((ier_ & kIerModemStatus) != 0 && msr_deltas_ != 0) {
    return kIirModemStatus;
  }
  return kIirNone;
}

std::vector<uint8_t> Serial::save_state() const {
  const std::lock_guard lock(mutex_);
  snapshot::ByteWriter out;
  for (uint8_t value : {ier_, lcr_, mcr_, scr_, dll_, dlm_, msr_deltas_}) {
    out.put(value);
  }
  out.put<uint8_t>(fifo_enabled_ ? 1 : 0);
  out.put<uint8_t>(thr_empty_pending_ ? 1 : 0);
  return out.take();
}

Status Serial::restore_state(std::span<const uint8_t> bytes) {
  snapshot::ByteReader in(bytes);
  std::array<uint8_t, 9> v{};
  for (auto& value : v) {
    value = DSEC_TRY(in.get<uint8_t>("serial port registers"));
  }
  DSEC_TRY(in.expect_end("serial port state"));
  const std::lock_guard lock(mutex_);
  ier_ = v[0];
  lcr_ = v[1];
  mcr_ = v[2];
  scr_ = v[3];
  dll_ = v[4];
  dlm_ = v[5];
  msr_deltas_ = v[6] & 0x0f;
  fifo_enabled_ = v[7] != 0;
  thr_empty_pending_ = v[8] != 0;
  update_interrupt();
  return ok();
}

void Serial::update_interrupt() {
  // The line follows IIR. It is not gated by MCR.OUT2 (as on a PC's board): Firecracker,
  // kvmtool and QEMU do not gate it either, and some guests never set OUT2.
  const bool raised = interrupt_identification() != kIirNone;
  if (raised == interrupt_raised_) {
    return;
  }
  interrupt_raised_ = raised;
  if (interrupt_) {
    interrupt_(raised);
  }
}

}  // namespace dsec::devices
