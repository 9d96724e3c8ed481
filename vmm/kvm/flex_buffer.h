// Storage for the KVM structs that end in a flexible array (kvm_cpuid2, kvm_msrs,
// kvm_msr_list): a header followed by `capacity` entries, zeroed and aligned for both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace dsec::kvm {

template <typename Header, typename Entry>
class FlexBuffer {
  static_assert(alignof(Header) <= alignof(uint64_t) && alignof(Entry) <= alignof(uint64_t));

 public:
  explicit FlexBuffer(size_t capacity)
      : words_(std::make_unique<uint64_t[]>(
            (sizeof(Header) + capacity * sizeof(Entry) + sizeof(uint64_t) - 1) /
            sizeof(uint64_t))) {}

  Header* get() { return reinterpret_cast<Header*>(words_.get()); }
  Header* operator->() { return get(); }

 private:
  std::unique_ptr<uint64_t[]> words_;  // value-initialized: zeroed
};

}  // namespace dsec::kvm
