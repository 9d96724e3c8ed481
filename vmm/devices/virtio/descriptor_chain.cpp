#include "vmm/devices/virtio/descriptor_chain.h"

#include <fmt/format.h>

#include <limits>

#include "vmm/devices/virtio/virtio_spec.h"

namespace dsec::virtio {
namespace {

uint64_t total_bytes(const std::vector<GuestRange>& buffers) {
  uint64_t total = 0;
  for (const GuestRange& buffer : buffers) {
    total += buffer.size;
  }
  return total;
}

// What is wrong with [addr, addr + len) as a buffer or an indirect table, or nullptr.
const char* range_problem(const GuestMemory& memory, uint64_t addr, uint64_t len) {
  if (len > std::numeric_limits<uint64_t>::max() - addr) {
    return "wraps past the top of the address space";
  }
  if (!memory.contains(addr, len)) {
    return "is not inside guest RAM";
  }
  return nullptr;
}

// Walks one chain; `table` is switched to an indirect table when one is met.
class ChainReader {
 public:
  ChainReader(const GuestMemory& memory, const DescriptorTable& table)
      : memory_(memory),
        table_address_(table.address),
        table_entries_(table.size),
        indirect_allowed_(table.indirect_allowed) {}

  Status read(uint16_t head, DescriptorChain& chain) {
    uint32_t index = head;
    uint32_t count = 0;  // descriptors read from the current table
    for (;;) {
      if (index >= table_entries_) {
        return fail(fmt::format("{} index {} is outside the table of {} entries", where(), index,
                                table_entries_));
      }
      if (++count > table_entries_) {
        return fail(fmt::format("{} chain is longer than its table of {} entries (a loop?)",
                                where(), table_entries_));
      }
      const VirtqDesc desc = DSEC_TRY(
          memory_.read_obj<VirtqDesc>(table_address_ + uint64_t{index} * sizeof(VirtqDesc)));

      if ((desc.flags & kDescFlagIndirect) != 0) {
        DSEC_TRY(enter_indirect_table(index, desc));
        index = 0;
        count = 0;
        continue;
      }
      if (const char* problem = range_problem(memory_, desc.addr, desc.len)) {
        return fail(fmt::format("{} descriptor {}: buffer [{:#x}, +{:#x}) {}", where(), index,
                                desc.addr, desc.len, problem));
      }
      const GuestRange buffer{desc.addr, desc.len};
      if ((desc.flags & kDescFlagWrite) != 0) {
        chain.writable.push_back(buffer);
      } else if (!chain.writable.empty()) {
        return fail(
            fmt::format("{} descriptor {} is device-readable but follows a device-writable one",
                        where(), index));
      } else {
        chain.readable.push_back(buffer);
      }
      if ((desc.flags & kDescFlagNext) == 0) {
        return ok();
      }
      index = desc.next;
    }
  }

 private:
  std::string where() const { return in_indirect_ ? "indirect table:" : "descriptor table:"; }

  // 2.7.5.3: the descriptor at `index` refers to a table of descriptors.
  Status enter_indirect_table(uint32_t index, const VirtqDesc& desc) {
    if (!indirect_allowed_) {
      return fail(
          fmt::format("{} descriptor {} is indirect but VIRTIO_F_INDIRECT_DESC was not "
                      "negotiated",
                      where(), index));
    }
    if (in_indirect_) {
      return fail(
          fmt::format("indirect table: descriptor {} is indirect inside an indirect table", index));
    }
    if ((desc.flags & kDescFlagNext) != 0) {
      return fail(
          fmt::format("descriptor table: descriptor {} is indirect and also has NEXT", index));
    }
    if (desc.len == 0 || desc.len % sizeof(VirtqDesc) != 0 ||
        desc.len / sizeof(VirtqDesc) > kMaxQueueSize) {
      return fail(
          fmt::format("descriptor table: descriptor {} names an indirect table of {} "
                      "bytes (must be a non-zero multiple of 16, at most {} entries)",
                      index, desc.len, kMaxQueueSize));
    }
    if (const char* problem = range_problem(memory_, desc.addr, desc.len)) {
      return fail(fmt::format("descriptor table: descriptor {}: indirect table [{:#x}, +{:#x}) {}",
                              index, desc.addr, desc.len, problem));
    }
    table_address_ = desc.addr;
    table_entries_ = desc.len / sizeof(VirtqDesc);
    in_indirect_ = true;
    return ok();
  }

  const GuestMemory& memory_;
  uint64_t table_address_;
  uint32_t table_entries_;
  const bool indirect_allowed_;
  bool in_indirect_ = false;
};

}  // namespace

uint64_t DescriptorChain::readable_bytes() const {
  return total_bytes(readable);
}

uint64_t DescriptorChain::writable_bytes() const {
  return total_bytes(writable);
}

Result<DescriptorChain> read_descriptor_chain(const GuestMemory& memory,
                                              const DescriptorTable& table, uint16_t head) {
  DescriptorChain chain;
  chain.head = head;
  if (auto status = ChainReader(memory, table).read(head, chain); !status) {
    return std::unexpected(status.error().with_context(fmt::format("chain at head {}", head)));
  }
  return chain;
}

}  // namespace dsec::virtio
