#include "vmm/seccomp/filter.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "vmm/seccomp/allow_lists.h"

namespace dsec::seccomp {
namespace {

std::string describe(const SyscallRule& rule) {
  std::string text(rule.syscall);
  for (const ArgCondition& c : rule.conditions) {
    text += fmt::format(" (arg{} & {:#x}) == {:#x}", c.arg, c.mask, c.value);
  }
  if (rule.error != 0) {
    text += fmt::format(" fails with errno {}", rule.error);
  }
  return text;
}

Status add_rule(scmp_filter_ctx ctx, const SyscallRule& rule) {
  const std::string name(rule.syscall);
  const int number = seccomp_syscall_resolve_name(name.c_str());
  if (number == __NR_SCMP_ERROR) {
    return fail("seccomp: libseccomp knows no system call named " + name,
                "the allow list (vmm/seccomp/allow_lists.cpp) is wrong");
  }
  std::vector<scmp_arg_cmp> comparisons;
  comparisons.reserve(rule.conditions.size());
  for (const ArgCondition& c : rule.conditions) {
    comparisons.push_back({c.arg, SCMP_CMP_MASKED_EQ, c.mask, c.value});
  }
  const int rc = seccomp_rule_add_array(
      ctx, rule.error != 0 ? SCMP_ACT_ERRNO(static_cast<uint16_t>(rule.error)) : SCMP_ACT_ALLOW,
      number, static_cast<unsigned>(comparisons.size()), comparisons.data());
  if (rc != 0) {
    return fail_errno("seccomp: cannot add the rule " + describe(rule), -rc);
  }
  return ok();
}

}  // namespace

Result<Filter> Filter::build(Role role, ViolationAction action) {
  const uint32_t violation = action == ViolationAction::kTrap ? SCMP_ACT_TRAP : SCMP_ACT_LOG;
  Filter filter(seccomp_init(violation));
  if (filter.ctx_ == nullptr) {
    return fail("seccomp: cannot create a filter (out of memory?)");
  }
  // A call of another architecture (int 0x80's 32-bit calls) is a violation too.
  if (const int rc = seccomp_attr_set(filter.ctx_, SCMP_FLTATR_ACT_BADARCH, violation); rc != 0) {
    return fail_errno("seccomp: cannot set the filter's foreign-architecture action", -rc);
  }
  // A binary tree of the calls rather than a list: each KVM_RUN of a vCPU pays for the
  // filter.
  if (const int rc = seccomp_attr_set(filter.ctx_, SCMP_FLTATR_CTL_OPTIMIZE, 2); rc != 0) {
    return fail_errno("seccomp: cannot ask for a binary-tree filter", -rc);
  }
  auto rules = allow_list(role);
  const auto sanitizer = sanitizer_runtime_allow_list();
  rules.insert(rules.end(), sanitizer.begin(), sanitizer.end());
  // Groups overlap (close, say): each rule once.
  std::sort(rules.begin(), rules.end(),
            [](const SyscallRule& a, const SyscallRule& b) { return describe(a) < describe(b); });
  rules.erase(std::unique(rules.begin(), rules.end()), rules.end());
  for (const SyscallRule& rule : rules) {
    DSEC_TRY(add_rule(filter.ctx_, rule));
  }
  return filter;
}

Filter& Filter::operator=(Filter&& other) noexcept {
  if (this != &other) {
    if (ctx_ != nullptr) {
      seccomp_release(ctx_);
    }
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

Filter::~Filter() {
  if (ctx_ != nullptr) {
    seccomp_release(ctx_);
  }
}

Status Filter::load() const {
  if (const int rc = seccomp_load(ctx_); rc != 0) {
    return fail_errno("seccomp: cannot load the thread's filter", -rc,
                      "does this kernel have seccomp filters? --seccomp=off runs without them");
  }
  return ok();
}

Status Filter::load_all_threads() const {
  if (const int rc = seccomp_attr_set(ctx_, SCMP_FLTATR_CTL_TSYNC, 1); rc != 0) {
    return fail_errno("seccomp: cannot ask for the filter in every thread (TSYNC)", -rc);
  }
  if (const int rc = seccomp_load(ctx_); rc != 0) {
    return fail_errno("seccomp: cannot load the process's filter into every thread", -rc,
                      "does this kernel have seccomp filters? --seccomp=off runs without them");
  }
  return ok();
}

}  // namespace dsec::seccomp
