// The guest's console on the host (machine/console.h): a guest writing as fast as it can
// never blocks its vCPU nor grows the VMM's memory, whoever reads (or does not read) the
// output; a console file stops at its limit; host input reaches the UART.
#include "vmm/machine/console.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/file_text.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/legacy/serial.h"
#include "vmm/machine/console_buffer.h"

namespace dsec::machine {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Bounds that a loaded machine keeps far inside: not timings.
constexpr auto kGenerousDeadline = 20s;

struct Pipe {
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read_end = UniqueFd(fds[0]);
    write_end = UniqueFd(fds[1]);
  }
  UniqueFd read_end;
  UniqueFd write_end;
};

// What the guest "transmits": every byte a THR write, as the 8250 driver does.
void transmit(devices::Serial& serial, std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<uint8_t>(c);
    serial.write(0, std::span(&byte, 1));
  }
}

TEST(ConsoleBuffer, KeepsWhatFitsInOrderAcrossTheWrapAndCountsTheRest) {
  ConsoleBuffer buffer(8);
  const std::string_view a = "abcdef";
  EXPECT_TRUE(buffer.push(std::span(reinterpret_cast<const uint8_t*>(a.data()), a.size())));
  buffer.consume(4);  // "ef" left at 4..5
  const std::string_view b = "ghijklmn";
  EXPECT_FALSE(buffer.push(std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size())));
  EXPECT_EQ(buffer.size(), 8U);
  EXPECT_EQ(buffer.dropped(), 2U);  // "mn"
  std::vector<uint8_t> out(16);
  out.resize(buffer.peek(out));
  EXPECT_EQ(std::string(out.begin(), out.end()), "efghijkl");
  EXPECT_EQ(buffer.discard(), 8U);
  EXPECT_EQ(buffer.size(), 0U);
}

TEST(Console, GuestOutputReachesTheOutputInOrder) {
  Pipe pipe;
  ASSERT_OK_AND_ASSIGN(auto console, Console::create({.output_fd = pipe.write_end.get()}));
  devices::Serial serial(console->output_sink(), nullptr);
  ASSERT_OK(console->start(&serial, nullptr));
  transmit(serial, "boot ok\n");
  console->stop();
  pipe.write_end.reset();
  std::string read_back;
  char chunk[64];
  ssize_t n = 0;
  while ((n = ::read(pipe.read_end.get(), chunk, sizeof chunk)) > 0) {
    read_back.append(chunk, static_cast<size_t>(n));
  }
  EXPECT_EQ(read_back, "boot ok\n");
  EXPECT_EQ(console->figures().written, 8U);
}

TEST(Console, APipeNobodyReadsNeverBlocksTheGuestAndDropsWhatDoesNotFit) {
  // Nobody reads: the pipe fills (64 KiB), then the buffer, and the rest is dropped.
  Pipe pipe;
  ASSERT_OK_AND_ASSIGN(auto console, Console::create({.output_fd = pipe.write_end.get()}));
  devices::Serial serial(console->output_sink(), nullptr);
  ASSERT_OK(console->start(&serial, nullptr));
  const std::string line(1023, 'x');
  constexpr size_t kLines = 8 * 1024;  // 8 MiB
  const auto start = Clock::now();
  for (size_t i = 0; i < kLines; ++i) {
    transmit(serial, line + "\n");
  }
  EXPECT_LT(Clock::now() - start, kGenerousDeadline);
  console->stop();  // returns although the pipe never drains
  EXPECT_LT(Clock::now() - start, kGenerousDeadline);
  const Console::Figures f = console->figures();
  EXPECT_LE(f.written, size_t{1} << 20);  // at most what the pipe holds
  EXPECT_GE(f.dropped_slow_reader, kLines * 1024 - (size_t{2} << 20));
  EXPECT_EQ(f.written + f.dropped_slow_reader + f.dropped_output_stopped, kLines * 1024);
}

TEST(Console, AReaderThatGoesAwayStopsTheOutputWithoutASignal) {
  Pipe pipe;
  ASSERT_OK_AND_ASSIGN(auto console, Console::create({.output_fd = pipe.write_end.get()}));
  devices::Serial serial(console->output_sink(), nullptr);
  ASSERT_OK(console->start(&serial, nullptr));
  pipe.read_end.reset();  // EPIPE from now on; SIGPIPE would kill this test
  transmit(serial, "nobody hears this\n");
  const auto deadline = Clock::now() + kGenerousDeadline;
  while (!console->figures().output_failed && Clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(console->figures().output_failed);
  transmit(serial, "nor this\n");
  console->stop();
  EXPECT_EQ(console->figures().dropped_output_stopped, 18U + 9U);
}

TEST(Console, AConsoleFileStopsAtItsLimit) {
  test::TempDir dir;
  const std::string path = dir.file("console.log");
  const UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ASSERT_TRUE(file);
  constexpr uint64_t kLimit = 10000;
  ASSERT_OK_AND_ASSIGN(auto console,
                       Console::create({.output_fd = file.get(), .output_limit = kLimit}));
  devices::Serial serial(console->output_sink(), nullptr);
  ASSERT_OK(console->start(&serial, nullptr));
  const std::string line(99, 'y');
  for (int i = 0; i < 1000; ++i) {  // 100 000 bytes; the first 64 KiB fit the buffer at least
    transmit(serial, line + "\n");
  }
  console->stop();
  EXPECT_EQ(test::file_text(path).size(), kLimit);
  const Console::Figures f = console->figures();
  EXPECT_TRUE(f.limit_reached);
  EXPECT_EQ(f.written, kLimit);
  EXPECT_EQ(f.written + f.dropped_slow_reader + f.dropped_output_stopped, 100000U);
}

TEST(Console, WithoutAnOutputEverythingIsDroppedAndCounted) {
  ASSERT_OK_AND_ASSIGN(auto console, Console::create({}));
  devices::Serial serial(console->output_sink(), nullptr);
  ASSERT_OK(console->start(&serial, nullptr));
  transmit(serial, "lost");
  console->stop();
  EXPECT_EQ(console->figures().dropped_output_stopped, 4U);
}

TEST(Console, HostInputReachesTheUart) {
  Pipe input;
  ASSERT_OK_AND_ASSIGN(auto console, Console::create({.input_fd = input.read_end.get()}));
  devices::Serial serial(console->output_sink(), nullptr, 4);
  ASSERT_OK(console->start(&serial, nullptr));
  // More than the UART's 4-byte FIFO: the rest waits in the console thread until read.
  ASSERT_EQ(::write(input.write_end.get(), "typed!", 6), 6);
  std::string received;
  const auto deadline = Clock::now() + kGenerousDeadline;
  while (received.size() < 6 && Clock::now() < deadline) {
    uint8_t lsr = 0;
    serial.read(5, std::span(&lsr, 1));
    if ((lsr & 0x01) == 0) {
      std::this_thread::sleep_for(1ms);
      continue;
    }
    uint8_t byte = 0;
    serial.read(0, std::span(&byte, 1));
    received += static_cast<char>(byte);
  }
  console->stop();
  EXPECT_EQ(received, "typed!");
}

}  // namespace
}  // namespace dsec::machine
