// A role's allow list (allow_lists.h) as a seccomp filter, built with libseccomp and loaded
// into the calling thread alone: no TSYNC, so each thread keeps the filter of its own role.
// A system call the list does not allow is a violation: with kTrap it raises SIGSYS in
// the thread (violation_report.h ends the VMM), with kLog the kernel logs it and lets it
// run.
#pragma once

#include <seccomp.h>

#include "vmm/common/error.h"
#include "vmm/seccomp/role.h"

namespace dsec::seccomp {

enum class ViolationAction { kTrap, kLog };

class Filter {
 public:
  static Result<Filter> build(Role role, ViolationAction action);
  Filter(Filter&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}
  Filter& operator=(Filter&& other) noexcept;
  Filter(const Filter&) = delete;
  Filter& operator=(const Filter&) = delete;
  ~Filter();

  // Sets no_new_privs on the calling thread (a filter needs it without CAP_SYS_ADMIN) and
  // loads the filter into it. A thread cannot lose a filter once it has one.
  Status load() const;
  // The same into every thread of the process at once (TSYNC), for a process with one role
  // (the pool daemon); fails when a thread has a filter of its own already.
  Status load_all_threads() const;

 private:
  explicit Filter(scmp_filter_ctx ctx) : ctx_(ctx) {}
  scmp_filter_ctx ctx_ = nullptr;
};

}  // namespace dsec::seccomp
