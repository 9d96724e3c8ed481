// For a test whose guest stopped answering: tells a wake-up that the test bed lost from a
// guest stuck on its own (docs/kvm-test-bed-faults.md, "Guests that stall").
//
// A Linux guest's CPUs wake each other with IPIs: a task woken for an idle CPU waits on
// that CPU's call-function queue until the call-function-single IPI (0xfb) arrives, and a
// reschedule IPI (0xfd) makes a CPU look at its run queue. dsec-vmm takes no part in them:
// the local APICs are KVM's (the in-kernel irqchip). SIGUSR2 makes dsec-vmm send each vCPU
// both (Machine::send_wakeup_ipis); a guest that answers soon after had been waiting for
// one that KVM, or the emulator under it, lost. The caller then prints lost_wakeup_line(),
// which tools/kvm-harness names as the test bed's fault. A guest that was waiting for no
// IPI finds its queues empty, and a stall of dsec-vmm's own (a device interrupt it never
// raised, say) does not end.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <thread>

namespace dsec::test {

// The start of the line that marks a stall as a lost wake-up, on a line of its own.
inline constexpr const char* kLostWakeupMarker = "dsec-test: LOST-WAKEUP";

// The marker line, with how long the guest took to answer after the IPIs.
inline std::string lost_wakeup_line(std::chrono::milliseconds answered_after) {
  return std::string(kLostWakeupMarker) + " the stalled guest answered " +
         std::to_string(answered_after.count()) +
         " ms after dsec-vmm sent its vCPUs the call-function-single and reschedule IPIs "
         "(SIGUSR2): it had been waiting for a wake-up that the test bed's KVM lost "
         "(docs/kvm-test-bed-faults.md)\n";
}

// After a step stalled: SIGUSR2 to the dsec-vmm `pid`, then `sent()` (true once its log
// says the IPIs went out; waited for up to 5 s), then `answered()` polled for up to
// `grace`. Returns the marker line where the guest answered, else a line that says what
// the probe found.
template <typename Sent, typename Answered>
std::string probe_lost_wakeup(pid_t pid, Sent sent, Answered answered,
                              std::chrono::seconds grace = std::chrono::seconds(20)) {
  using Clock = std::chrono::steady_clock;
  if (pid <= 0 || ::kill(pid, SIGUSR2) != 0) {
    return "wake-up probe: the VMM has ended\n";
  }
  const auto asked = Clock::now();
  while (!sent()) {
    if (Clock::now() - asked > std::chrono::seconds(5)) {
      return "wake-up probe: dsec-vmm did not log its wake-up IPIs within 5 s of SIGUSR2\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto start = Clock::now();
  while (Clock::now() - start < grace) {
    if (answered()) {
      return lost_wakeup_line(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "wake-up probe: the guest still had not answered " + std::to_string(grace.count()) +
         " s after its vCPUs were sent the call-function-single and reschedule IPIs: not a "
         "lost wake-up\n";
}

}  // namespace dsec::test
