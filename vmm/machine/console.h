// The guest's serial console (COM1) on the host: what the guest writes goes out to an fd
// (stdout, or a --console file), and what the host's input gives goes into the UART's
// receive FIFO. One thread, "dsec-console", does the host's side of both, so that a vCPU
// never waits on the host:
// - The UART's output sink only appends to a bounded buffer (ConsoleBuffer,
//   kOutputBufferBytes) and wakes the thread. When the host reads slower than the guest
//   writes (a pipe nobody reads, a slow terminal), what does not fit is dropped and counted:
//   the guest runs on, and the VMM's memory stays what it was.
// - The thread writes the buffer out in pieces of at most kWriteChunk bytes (PIPE_BUF), each
//   only once poll() says the fd takes data, so a pipe never blocks it; a write that blocks
//   all the same (a pipe another writer filled since the poll, a stopped terminal) holds
//   only this thread, and stop() interrupts it (thread_kick.h).
// - With an output limit (--console-limit for a --console file), the output stops after that
//   many bytes, with one log line; what follows is dropped. An output that fails (EPIPE: its
//   reader is gone, which is an error and not a SIGPIPE since main() ignores SIGPIPE; ENOSPC)
//   stops the output the same way.
// - Host input waits in the thread while the UART's receive FIFO is full.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/legacy/serial.h"
#include "vmm/machine/console_buffer.h"

namespace dsec::machine {

class Console {
 public:
  // The buffer between the vCPUs and the console thread: what the guest may have written
  // that the host has not taken.
  static constexpr size_t kOutputBufferBytes = size_t{64} * 1024;
  // The most one write hands the output fd: PIPE_BUF, which a pipe that polled writable
  // takes whole without blocking.
  static constexpr size_t kWriteChunk = 4096;
  // How long stop() goes on writing out what is buffered before it drops the rest.
  static constexpr std::chrono::milliseconds kFlushTimeout{200};

  struct Settings {
    int output_fd = -1;  // where the guest's output goes (not owned); -1: dropped
    int input_fd = -1;   // what the guest reads (not owned); -1: nothing
    // Bytes written to output_fd after which the rest of the output is dropped; 0: no limit.
    uint64_t output_limit = 0;
  };

  // What became of the guest's console output.
  struct Figures {
    uint64_t written = 0;              // bytes the output fd took
    uint64_t dropped_slow_reader = 0;  // no room in the buffer: the host read slower
    // After the output stopped (below), with no output, or still buffered at stop().
    uint64_t dropped_output_stopped = 0;
    bool limit_reached = false;  // the output stopped at output_limit
    bool output_failed = false;  // the output stopped on a write error
  };

  static Result<std::unique_ptr<Console>> create(const Settings& settings);
  ~Console();  // stop()
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  // The UART's output sink (called with the UART's lock held, on vCPU threads): it appends
  // to the buffer and never waits on the host. Valid while this Console lives.
  devices::Serial::OutputSink output_sink();
  // Starts the console thread (when there is output or input to serve); host input goes to
  // `serial`, which must outlive stop(). The thread calls `lock_down` first (its seccomp
  // filter) and serves nothing if that fails.
  Status start(devices::Serial* serial, std::function<Status()> lock_down);
  // Writes out what is buffered (for at most kFlushTimeout), ends the thread and logs what
  // was dropped, if anything. Idempotent; call it once the vCPUs no longer run.
  void stop();

  Figures figures() const;

 private:
  explicit Console(const Settings& settings, UniqueFd wake);
  void wake();
  void run(devices::Serial* serial);
  // One write of the buffer's oldest bytes to the output fd.
  void write_output();
  // Stops the output for good: what is buffered and what comes later is dropped.
  void stop_output();
  void log_drops() const;

  const Settings settings_;
  UniqueFd wake_;  // eventfd: output buffered, or stop()
  ConsoleBuffer buffer_{kOutputBufferBytes};
  // Set once the output stops (its limit, a failure, or no fd): the sink drops at once.
  std::atomic<bool> output_stopped_{false};
  std::atomic<uint64_t> dropped_output_stopped_{0};
  std::atomic<uint64_t> written_{0};
  std::atomic<bool> limit_reached_{false};
  std::atomic<bool> output_failed_{false};
  bool slow_reader_logged_ = false;  // on the console thread

  std::atomic<bool> stopping_{false};
  std::mutex finished_mutex_;
  std::condition_variable finished_cv_;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace dsec::machine
