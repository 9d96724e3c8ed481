#include "vmm/machine/vcpu_thread.h"

#include <linux/kvm.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <string>
#include <type_traits>

#include "vmm/kvm/cpu_state_text.h"
#include "vmm/machine/thread_kick.h"

namespace dsec::machine {

VcpuThread::VcpuThread(kvm::Vcpu vcpu, const devices::Bus& pio, const devices::Bus& mmio,
                       RunControl& control, GuestProfiler* profiler, seccomp::Policy seccomp)
    : vcpu_(std::move(vcpu)),
      pio_(pio),
      mmio_(mmio),
      control_(control),
      profiler_(profiler),
      seccomp_(seccomp) {
  install_thread_kick_handler();
}

VcpuThread::~VcpuThread() {
  join();
}

void VcpuThread::start() {
  thread_ = std::thread([this] {
    handle_.store(pthread_self());
    started_.store(true, std::memory_order_release);
    const std::string name = "dsec-vcpu" + std::to_string(vcpu_.id());
    pthread_setname_np(pthread_self(), name.c_str());
    if (auto filtered = seccomp_.apply(seccomp::Role::kVcpu); !filtered) {
      control_.request_exit({VmExitKind::kVmmError, name + ": " + filtered.error().message()});
    } else {
      loop();
    }
    control_.thread_exited();
  });
}

void VcpuThread::kick() {
  // immediate_exit covers a thread about to enter KVM_RUN; the signal one already inside.
  vcpu_.set_immediate_exit(true);
  if (started_.load(std::memory_order_acquire)) {
    pthread_kill(handle_.load(), thread_kick_signal());
  }
}

void VcpuThread::join() {
  if (thread_.joinable()) {
    thread_.join();
  }
}

void VcpuThread::loop() {
  while (control_.wait_until_runnable()) {
    control_.note_kvm_run();
    auto exit = vcpu_.run();
    if (!exit && exit.error().os_errno() == EAGAIN) {
      // An application processor still waiting for INIT/SIPI was woken: just run it again.
      continue;
    }
    if (!exit) {
      control_.request_exit({VmExitKind::kKvmError,
                             "vCPU " + std::to_string(vcpu_.id()) + ": " + exit.error().message()});
      return;
    }
    if (std::holds_alternative<kvm::InterruptedExit>(*exit)) {
      // Clear the kick before looking at the state: a kick after this stays pending.
      vcpu_.set_immediate_exit(false);
      if (profiler_ != nullptr) {
        if (auto regs = vcpu_.get_regs(); regs) {
          profiler_->record(vcpu_.id(), regs->rip);
        }
      }
      continue;
    }
    if (!handle(*exit)) {
      return;
    }
    if (control_.state() == RunState::kPaused && !complete_pending_io()) {
      return;
    }
  }
}

bool VcpuThread::complete_pending_io() {
  // KVM finishes a port or MMIO instruction (an IN's or a read's result into its register,
  // RIP past it) only when KVM_RUN is entered again. With immediate_exit set it does just
  // that and returns EINTR without running guest code; a string instruction may exit once
  // more for its next piece first. A vCPU parked before this would be saved mid-instruction,
  // and its clone would repeat the I/O.
  for (;;) {
    vcpu_.set_immediate_exit(true);
    auto exit = vcpu_.run();
    if (!exit && exit.error().os_errno() == EAGAIN) {
      vcpu_.set_immediate_exit(false);
      return true;  // an application processor waiting for INIT/SIPI: nothing pending
    }
    if (!exit) {
      control_.request_exit({VmExitKind::kKvmError,
                             "vCPU " + std::to_string(vcpu_.id()) +
                                 " completing its I/O for a pause: " + exit.error().message()});
      return false;
    }
    if (std::holds_alternative<kvm::InterruptedExit>(*exit)) {
      vcpu_.set_immediate_exit(false);
      return true;
    }
    if (!handle(*exit)) {
      return false;
    }
  }
}

bool VcpuThread::handle(const kvm::VcpuExit& exit) {
  const std::string who = "vCPU " + std::to_string(vcpu_.id());
  return std::visit(
      [&](const auto& e) -> bool {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, kvm::IoExit>) {
          // REP INS/OUTS: count accesses of `size` bytes each, laid out in order.
          for (uint32_t i = 0; i < e.count; ++i) {
            auto chunk = e.data.subspan(size_t{i} * e.size, e.size);
            if (e.direction == kvm::IoDirection::kOut) {
              pio_.write(e.port, chunk);
            } else {
              pio_.read(e.port, chunk);
            }
          }
          return true;
        } else if constexpr (std::is_same_v<T, kvm::MmioExit>) {
          if (e.is_write) {
            mmio_.write(e.address, e.data);
          } else {
            mmio_.read(e.address, e.data);
          }
          return true;
        } else if constexpr (std::is_same_v<T, kvm::ShutdownExit>) {
          control_.request_exit(
              {VmExitKind::kTripleFault,
               who + " triple-faulted at " + kvm::describe_shutdown_state(vcpu_)});
          return false;
        } else if constexpr (std::is_same_v<T, kvm::HltExit>) {
          control_.request_exit({VmExitKind::kGuestPowerOff, who + " halted"});
          return false;
        } else if constexpr (std::is_same_v<T, kvm::SystemEventExit>) {
          switch (e.type) {
            case KVM_SYSTEM_EVENT_RESET:
              control_.request_exit({VmExitKind::kGuestReboot, who + " reset the system"});
              break;
            case KVM_SYSTEM_EVENT_CRASH:
              control_.request_exit({VmExitKind::kGuestPanic, who + " reported a crash"});
              break;
            default:
              control_.request_exit({VmExitKind::kGuestPowerOff, who + " shut the system down"});
              break;
          }
          return false;
        } else if constexpr (std::is_same_v<T, kvm::DebugExit>) {
          return true;
        } else {
          control_.request_exit({VmExitKind::kKvmError, who + ": " + kvm::describe(exit) + " at " +
                                                            kvm::describe_cpu_state(vcpu_)});
          return false;
        }
      },
      exit);
}

}  // namespace dsec::machine
