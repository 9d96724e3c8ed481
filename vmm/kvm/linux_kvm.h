// <linux/kvm.h>, made correct for C++. Include this, never <linux/kvm.h> directly.
//
// Linux 6.1's UAPI headers (Debian 12's linux-libc-dev) declare flexible arrays with
// __DECLARE_FLEX_ARRAY, which wraps them in a struct holding an empty struct. An empty
// struct has size 0 in C but 1 in C++, so in C++ kvm_msrs, kvm_msr_list, kvm_cpuid2 and
// kvm_xsave get the wrong layout, and the ioctl numbers computed from their sizes
// (KVM_GET_MSRS, KVM_SET_CPUID2, KVM_GET_XSAVE, ...) are not the kernel's: the ioctls fail
// with ENOTTY or read the entries at the wrong offset. Newer UAPI headers define the macro
// as `TYPE NAME[0]` under __cplusplus; this applies that definition before <linux/kvm.h>.
#pragma once

#include <linux/stddef.h>

// Zero-length arrays are a GNU extension that -Wpedantic reports where the macro is defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#undef __DECLARE_FLEX_ARRAY
// NOLINTNEXTLINE(cppcoreguidelines-macro-usage,bugprone-reserved-identifier)
#define __DECLARE_FLEX_ARRAY(TYPE, NAME) TYPE NAME[0]
#include <linux/kvm.h>
#pragma GCC diagnostic pop

#include <cstddef>

// These fail if <linux/kvm.h> was read before this header in the same translation unit.
static_assert(offsetof(kvm_msrs, entries) == 8, "include vmm/kvm/linux_kvm.h, not <linux/kvm.h>");
static_assert(offsetof(kvm_msr_list, indices) == 4, "include vmm/kvm/linux_kvm.h first");
static_assert(offsetof(kvm_cpuid2, entries) == 8, "include vmm/kvm/linux_kvm.h first");
static_assert(sizeof(kvm_xsave) == 4096, "include vmm/kvm/linux_kvm.h first");
static_assert(KVM_GET_MSRS == 0xc008ae88 && KVM_SET_CPUID2 == 0x4008ae90 &&
                  KVM_GET_XSAVE == 0x9000aea4,
              "KVM ioctl numbers differ from the kernel's");
