// The 16550A UART as a guest driver sees it: registers, interrupts, loopback and input.
#include "vmm/devices/legacy/serial.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dsec::devices {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Register offsets and bits, spelled as Linux's serial_reg.h does.
constexpr uint64_t kRx = 0, kTx = 0, kDll = 0, kIer = 1, kDlm = 1, kIir = 2, kFcr = 2, kLcr = 3,
                   kMcr = 4, kLsr = 5, kMsr = 6, kScr = 7;
constexpr uint8_t kIerRdi = 0x01, kIerThri = 0x02, kIerMsi = 0x08;
constexpr uint8_t kIirNoInt = 0x01, kIirThri = 0x02, kIirRdi = 0x04, kIirMsi = 0x00, kIirId = 0x0f;
constexpr uint8_t kLsrDr = 0x01, kLsrThre = 0x20, kLsrTemt = 0x40;
constexpr uint8_t kMcrDtr = 0x01, kMcrRts = 0x02, kMcrOut1 = 0x04, kMcrOut2 = 0x08, kMcrLoop = 0x10;
constexpr uint8_t kLcrDlab = 0x80;

std::span<const uint8_t> bytes_of(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// A UART with its output and interrupt line recorded.
class SerialTest : public ::testing::Test {
 protected:
  explicit SerialTest(size_t capacity = Serial::kDefaultInputCapacity)
      : serial_(
            [this](std::span<const uint8_t> bytes) { output_.append(bytes.begin(), bytes.end()); },
            [this](bool raised) { levels_.push_back(raised); }, capacity) {}

  uint8_t in(uint64_t reg) {
    uint8_t value = 0;
    serial_.read(reg, std::span(&value, 1));
    return value;
  }
  void out(uint64_t reg, uint8_t value) { serial_.write(reg, std::span(&value, 1)); }
  uint8_t iir_id() { return in(kIir)&kIirId; }

  std::string output_;
  std::vector<bool> levels_;  // every change of the interrupt line, in order
  Serial serial_;
};

TEST_F(SerialTest, TransmittedBytesReachTheSinkInOrder) {
  for (char c : std::string_view("hello\n")) {
    out(kTx, static_cast<uint8_t>(c));
  }
  EXPECT_EQ(output_, "hello\n");
  EXPECT_THAT(levels_, IsEmpty());  // no interrupt enabled, none signalled
}

TEST_F(SerialTest, LineStatusAlwaysShowsTheTransmitterEmpty) {
  EXPECT_EQ(in(kLsr), kLsrThre | kLsrTemt);
  out(kTx, 'x');
  EXPECT_EQ(in(kLsr), kLsrThre | kLsrTemt);
}

TEST_F(SerialTest, DlabTurnsOffsetsZeroAndOneIntoTheDivisorLatch) {
  out(kIer, kIerRdi);
  out(kLcr, kLcrDlab | 0x03);
  EXPECT_EQ(in(kDll), 12);  // 9600 baud until the guest says otherwise
  EXPECT_EQ(in(kDlm), 0);
  out(kDll, 0x01);  // 115200 baud
  out(kDlm, 0x02);
  EXPECT_EQ(in(kDll), 0x01);
  EXPECT_EQ(in(kDlm), 0x02);
  EXPECT_EQ(output_, "");  // the divisor write did not transmit
  out(kLcr, 0x03);
  EXPECT_EQ(in(kLcr), 0x03);
  EXPECT_EQ(in(kIer), kIerRdi);  // IER was not touched by the DLM write
  out(kTx, 'A');
  EXPECT_EQ(output_, "A");
  out(kLcr, kLcrDlab);
  EXPECT_EQ(in(kDll), 0x01);  // and the latch kept its value
  EXPECT_EQ(in(kDlm), 0x02);
}

TEST_F(SerialTest, InputSetsDataReadyAndIsReadInOrder) {
  EXPECT_EQ(serial_.enqueue_input(bytes_of("abc")), 3u);
  EXPECT_EQ(in(kLsr)&kLsrDr, kLsrDr);
  EXPECT_EQ(in(kRx), 'a');
  EXPECT_EQ(in(kRx), 'b');
  EXPECT_EQ(in(kLsr)&kLsrDr, kLsrDr);
  EXPECT_EQ(in(kRx), 'c');
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(in(kRx), 0);            // nothing more to read
  EXPECT_THAT(levels_, IsEmpty());  // the receive interrupt is not enabled
  EXPECT_EQ(iir_id(), kIirNoInt);
}

TEST_F(SerialTest, ReceiveInterruptIsRaisedOnlyWhenEnabled) {
  serial_.enqueue_input(bytes_of("x"));
  EXPECT_THAT(levels_, IsEmpty());
  EXPECT_FALSE(serial_.interrupt_raised());

  out(kIer, kIerRdi);  // enabling it with data waiting raises the line
  EXPECT_THAT(levels_, ElementsAre(true));
  EXPECT_EQ(iir_id(), kIirRdi);
  EXPECT_EQ(in(kRx), 'x');  // reading the data clears it
  EXPECT_THAT(levels_, ElementsAre(true, false));
  EXPECT_EQ(iir_id(), kIirNoInt);

  serial_.enqueue_input(bytes_of("yz"));  // new input while enabled raises it again
  EXPECT_THAT(levels_, ElementsAre(true, false, true));
  EXPECT_TRUE(serial_.interrupt_raised());
  in(kRx);
  EXPECT_TRUE(serial_.interrupt_raised());  // one byte still waiting
  in(kRx);
  EXPECT_THAT(levels_, ElementsAre(true, false, true, false));

  out(kIer, 0);
  serial_.enqueue_input(bytes_of("q"));
  EXPECT_THAT(levels_, ElementsAre(true, false, true, false));  // disabled again: no change
}

TEST_F(SerialTest, ReceivedDataOutranksThrEmptyInIir) {
  out(kIer, kIerRdi | kIerThri);
  EXPECT_THAT(levels_, ElementsAre(true));  // THR is empty
  serial_.enqueue_input(bytes_of("k"));
  EXPECT_EQ(iir_id(), kIirRdi);
  EXPECT_EQ(iir_id(), kIirRdi);  // reading IIR does not acknowledge received data...
  EXPECT_EQ(in(kRx), 'k');
  EXPECT_TRUE(serial_.interrupt_raised());
  EXPECT_EQ(iir_id(), kIirThri);   // ...and THR empty was pending underneath all along
  EXPECT_EQ(iir_id(), kIirNoInt);  // reading IIR while it says THR empty acknowledges it
  EXPECT_THAT(levels_, ElementsAre(true, false));
}

TEST_F(SerialTest, ThrEmptyInterruptComesBackAfterEachWrite) {
  out(kIer, kIerThri);
  EXPECT_EQ(iir_id(), kIirThri);
  EXPECT_EQ(iir_id(), kIirNoInt);
  EXPECT_THAT(levels_, ElementsAre(true, false));
  out(kTx, 'a');  // transmitted at once, so THR is empty again: a new rising edge
  EXPECT_THAT(levels_, ElementsAre(true, false, true));
  EXPECT_EQ(iir_id(), kIirThri);
  out(kIer, 0);
  EXPECT_EQ(iir_id(), kIirNoInt);
}

// serial8250_do_startup's check for UARTs that do not re-assert THRE (UART_BUG_THRE): with
// interrupts enabled, disabled and enabled again, both IIR reads must show an interrupt.
TEST_F(SerialTest, LinuxThreReassertionTestPasses) {
  out(kIer, kIerThri);
  const uint8_t iir1 = in(kIir);
  out(kIer, 0);
  out(kIer, kIerThri);
  const uint8_t iir2 = in(kIir);
  out(kIer, 0);
  EXPECT_EQ(iir1 & kIirNoInt, 0);
  EXPECT_EQ(iir2 & kIirNoInt, 0);
}

// The checks of Linux's autoconfig() (drivers/tty/serial/8250/8250_port.c) that decide
// whether a UART is there and which kind it is.
TEST_F(SerialTest, LinuxAutoconfigFindsA16550A) {
  // IER scratch test: 0 reads back 0, 0x0f reads back 0x0f.
  out(kIer, 0);
  EXPECT_EQ(in(kIer)&0x0f, 0);
  out(kIer, 0x0f);
  EXPECT_EQ(in(kIer)&0x0f, 0x0f);
  out(kIer, 0);
  // Loopback test: MCR = LOOP | RTS | OUT2 must show CTS | DCD in MSR's top nibble.
  out(kMcr, kMcrLoop | 0x0a);
  EXPECT_EQ(in(kMsr)&0xf0, 0x90);
  out(kMcr, kMcrOut2);
  // FIFO test: with the FIFO enabled, IIR bits 7-6 read 0b11.
  out(kFcr, 0x01);
  EXPECT_EQ(in(kIir) >> 6, 3);
  // EFR probes with LCR = 0xbf read offset 2, which must not read 0 on a plain 16550A.
  out(kLcr, 0xbf);
  EXPECT_NE(in(kIir), 0);
  out(kLcr, 0x03);
  // The XScale UUE bit (IER bit 6) must not stick.
  out(kIer, 0x40);
  EXPECT_EQ(in(kIer)&0x40, 0);
  // TI16750 test: bit 5 of IIR stays clear after FCR asks for 64-byte FIFOs.
  out(kFcr, 0x21);
  EXPECT_EQ(in(kIir)&0x20, 0);
}

TEST_F(SerialTest, FifoEnableShowsInIirAndFcrClearsTheReceiver) {
  EXPECT_EQ(in(kIir), kIirNoInt);
  out(kFcr, 0x01);
  EXPECT_EQ(in(kIir), 0xc0 | kIirNoInt);
  serial_.enqueue_input(bytes_of("stale"));
  out(kFcr, 0x01 | 0x02);  // clear the receive FIFO
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(serial_.input_space(), Serial::kDefaultInputCapacity);
  out(kFcr, 0x00);
  EXPECT_EQ(in(kIir), kIirNoInt);
}

TEST_F(SerialTest, LoopbackSendsTransmittedBytesToTheReceiverInstead) {
  out(kMcr, kMcrLoop);
  out(kIer, kIerRdi);
  out(kTx, 'z');
  EXPECT_EQ(output_, "");
  EXPECT_EQ(in(kLsr)&kLsrDr, kLsrDr);
  EXPECT_THAT(levels_, ElementsAre(true));
  EXPECT_EQ(in(kRx), 'z');
  out(kMcr, 0);
  out(kTx, 'y');
  EXPECT_EQ(output_, "y");
}

TEST_F(SerialTest, LoopbackMapsModemControlOntoModemStatus) {
  EXPECT_EQ(in(kMsr)&0xf0, 0xb0);  // a ready terminal: DCD, DSR, CTS
  out(kMcr, kMcrLoop);
  EXPECT_EQ(in(kMsr)&0xf0, 0x00);
  out(kMcr, kMcrLoop | kMcrRts);
  EXPECT_EQ(in(kMsr)&0xf0, 0x10);  // CTS
  out(kMcr, kMcrLoop | kMcrDtr);
  EXPECT_EQ(in(kMsr)&0xf0, 0x20);  // DSR
  out(kMcr, kMcrLoop | kMcrOut1);
  EXPECT_EQ(in(kMsr)&0xf0, 0x40);  // RI
  out(kMcr, kMcrLoop | kMcrOut2);
  EXPECT_EQ(in(kMsr)&0xf0, 0x80);  // DCD
  EXPECT_EQ(in(kMcr), kMcrLoop | kMcrOut2);
}

TEST_F(SerialTest, ModemStatusDeltasRaiseTheModemInterruptAndClearOnRead) {
  out(kMcr, kMcrLoop | kMcrOut1);
  in(kMsr);  // clear the deltas of entering loopback
  out(kIer, kIerMsi);
  EXPECT_THAT(levels_, IsEmpty());
  out(kMcr, kMcrLoop | kMcrRts);  // CTS rises, RI falls (trailing edge)
  EXPECT_THAT(levels_, ElementsAre(true));
  EXPECT_EQ(iir_id(), kIirMsi);
  EXPECT_EQ(in(kMsr), 0x10 | 0x01 | 0x04);  // CTS, delta CTS, trailing-edge RI
  EXPECT_EQ(in(kMsr), 0x10);
  EXPECT_THAT(levels_, ElementsAre(true, false));
}

TEST_F(SerialTest, ScratchRegisterKeepsWhatWasWritten) {
  out(kScr, 0x5a);
  EXPECT_EQ(in(kScr), 0x5a);
}

TEST_F(SerialTest, ReceiveFifoIsBoundedAndReportsWhatFit) {
  std::vector<uint8_t> input(100);
  for (size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<uint8_t>(i);
  }
  EXPECT_EQ(serial_.enqueue_input(input), Serial::kDefaultInputCapacity);
  EXPECT_EQ(serial_.input_space(), 0u);
  EXPECT_EQ(serial_.enqueue_input(input), 0u);
  for (size_t i = 0; i < Serial::kDefaultInputCapacity; ++i) {
    ASSERT_EQ(in(kRx), i);
  }
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(serial_.input_space(), Serial::kDefaultInputCapacity);
}

TEST_F(SerialTest, LoopbackBytesBeyondTheFifoAreDropped) {
  out(kMcr, kMcrLoop);
  for (int i = 0; i < 100; ++i) {
    out(kTx, static_cast<uint8_t>(i));
  }
  EXPECT_EQ(serial_.input_space(), 0u);
  for (size_t i = 0; i < Serial::kDefaultInputCapacity; ++i) {  // the first 64 were kept
    ASSERT_EQ(in(kRx), i);
  }
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(output_, "");
}

TEST(SerialCapacity, CapacityIsConfigurableAndAtLeastOne) {
  Serial large(nullptr, nullptr, 4096);
  EXPECT_EQ(large.enqueue_input(std::vector<uint8_t>(5000, 'a')), 4096u);
  Serial zero(nullptr, nullptr, 0);
  EXPECT_EQ(zero.enqueue_input(bytes_of("ab")), 1u);
}

// An ISA bus splits a 16-bit access into two byte accesses at consecutive ports.
TEST_F(SerialTest, WideAccessesReachConsecutiveRegisters) {
  const std::array<uint8_t, 2> thr_and_ier{'W', kIerThri};
  serial_.write(kTx, thr_and_ier);
  EXPECT_EQ(output_, "W");
  EXPECT_EQ(in(kIer), kIerThri);

  std::array<uint8_t, 2> lsr_and_msr{};
  serial_.read(kLsr, lsr_and_msr);
  EXPECT_THAT(lsr_and_msr, ElementsAre(kLsrThre | kLsrTemt, 0xb0));

  std::array<uint8_t, 4> past_the_end{};
  serial_.read(kScr - 1, past_the_end);  // MSR, SCR, then nothing
  EXPECT_THAT(past_the_end, ElementsAre(0xb0, 0x00, 0xff, 0xff));
}

// Whatever the guest does with offsets and sizes, the device neither crashes nor reads or
// writes out of bounds (the unit tests also run under ASan/UBSan in CI).
TEST_F(SerialTest, AnyOffsetAndSizeIsSafe) {
  std::mt19937_64 random(42);
  std::vector<uint8_t> buffer(16);
  const uint64_t odd_offsets[] = {8, 9, 255, 0x10000, ~uint64_t{0}, ~uint64_t{0} - 3};
  for (int i = 0; i < 20000; ++i) {
    const uint64_t offset = (i % 10 == 0) ? odd_offsets[random() % 6] : random() % 8;
    const size_t size = random() % (buffer.size() + 1);
    for (auto& byte : buffer) {
      byte = static_cast<uint8_t>(random());
    }
    if (random() % 2 == 0) {
      serial_.write(offset, std::span(buffer).first(size));
    } else {
      serial_.read(offset, std::span(buffer).first(size));
    }
    if (i % 7 == 0) {
      serial_.enqueue_input(std::span(buffer).first(size));
    }
  }
  // Still a working UART afterwards.
  out(kLcr, 0x03);
  out(kMcr, kMcrOut2);
  output_.clear();
  out(kTx, 'k');
  EXPECT_EQ(output_, "k");
}

// A host thread enqueues while a vCPU thread reads: every byte arrives once, in order.
TEST(SerialThreads, InputFromAHostThreadArrivesInOrder) {
  Serial serial(nullptr, nullptr, 16);
  constexpr size_t kBytes = 20000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::thread host([&serial, deadline] {
    size_t sent = 0;
    while (sent < kBytes && std::chrono::steady_clock::now() < deadline) {
      std::array<uint8_t, 7> chunk{};
      const size_t n = std::min(chunk.size(), kBytes - sent);
      for (size_t i = 0; i < n; ++i) {
        chunk[i] = static_cast<uint8_t>((sent + i) * 7);
      }
      const size_t taken = serial.enqueue_input(std::span(chunk).first(n));
      sent += taken;
      if (taken == 0) {
        std::this_thread::yield();  // the FIFO is full: let the guest read
      }
    }
  });
  size_t received = 0;
  size_t out_of_order = 0;
  while (received < kBytes && std::chrono::steady_clock::now() < deadline) {
    uint8_t lsr = 0;
    serial.read(kLsr, std::span(&lsr, 1));
    if ((lsr & kLsrDr) == 0) {
      std::this_thread::yield();
      continue;
    }
    uint8_t byte = 0;
    serial.read(kRx, std::span(&byte, 1));
    if (byte != static_cast<uint8_t>(received * 7)) {
      ++out_of_order;
    }
    ++received;
  }
  host.join();
  EXPECT_EQ(received, kBytes);
  EXPECT_EQ(out_of_order, 0u);
}

}  // namespace
}  // namespace dsec::devices
