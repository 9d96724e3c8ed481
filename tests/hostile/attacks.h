// What the hostile-guest tests share: a batch of attacks run in one dsec-vmm (run_batch),
// and the descriptor-chain attacks every queue of every device gets.
// Each attack ends with the device working again: a valid request after a device reset
// where the spec has the device refuse more work (DEVICE_NEEDS_RESET), and without one
// where the device must shrug the attack off.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "tests/hostile/requests.h"

namespace dsec::test::hostile {

// A queue to attack: the driver negotiates `features` and sets up every queue; `trigger`
// makes the device take the chain the attack published at the next avail entry of
// `queue` (a notify, or for an rx queue a packet the device must deliver); `valid` (after
// a fresh init) is a request that must succeed.
struct QueueTarget {
  std::string name;
  Driver* driver;
  uint16_t queue;
  uint64_t features = kVersion1 | kIndirectDesc;
  std::function<void()> trigger;
  std::function<void()> valid;
};

// Runs a batch of attacks in one dsec-vmm, in order; the run passes if every attack and
// the valid request after it did. A failure names the attack (the guest's last label).
inline void run_batch(HostileVm& vm, const std::string& batch,
                      const std::function<void(Script&, Drivers&)>& build) {
  Script script;
  Drivers drivers(script, vm);
  script.label(batch);
  build(script, drivers);
  const ProcessOutput out = vm.run(script);
  EXPECT_TRUE(passed(out)) << batch;
  // Each step the guest began printed a line; the runtime is the whole dsec-vmm's.
  size_t steps = 0;
  for (size_t at = out.out.find("hostile: "); at != std::string::npos;
       at = out.out.find("hostile: ", at + 1)) {
    ++steps;
  }
  std::cout << batch << ": " << (passed(out) ? "passed" : "FAILED") << ", " << steps
            << " lines from the guest, dsec-vmm ran " << out.elapsed.count() << " ms\n";
}

// The queue takes one chain whose head descriptor (index 0 of the queue's table) the
// attack wrote, then must show DEVICE_NEEDS_RESET; after a reset the valid request works.
inline void attack_chain(Script& s, const QueueTarget& t, const std::string& name,
                         const std::function<void(Driver&, QueueArea&)>& write_chain) {
  Driver& d = *t.driver;
  s.label(t.name + ": " + name);
  d.init(t.features);
  write_chain(d, d.queue(t.queue));
  t.trigger();
  d.wait_needs_reset();
  d.init(t.features);
  t.valid();
}

// Every descriptor-chain and ring-index attack on one queue (virtio 1.2, 2.7.5 and 2.7.6):
// buffers outside RAM, straddling its end, on device MMIO, wrapping the address space;
// loops, bad indices, avail idx jumps; bad, nested and unnegotiated indirect tables.
inline void chain_attacks(Script& s, const QueueTarget& t) {
  const auto one_buffer = [&](const std::string& name, uint64_t addr, uint32_t len) {
    attack_chain(s, t, name, [&](Driver& d, QueueArea&) {
      d.desc(t.queue, 0, addr, len, kWrite);
      d.publish(t.queue, 0);
    });
  };
  one_buffer("a buffer past the end of RAM", kRamBytes, 64);
  one_buffer("a buffer straddling the end of RAM", kRamBytes - 32, 64);
  one_buffer("a buffer in the MMIO gap below the devices", 2ULL << 30, 64);
  one_buffer("a buffer on the device's own registers", t.driver->reg(0), 0x100);
  one_buffer("a buffer wrapping 2^64", 0xffff'ffff'ffff'f000ULL, 0x2000);
  one_buffer("a 4 GiB buffer", kDeviceAreaBase, 0xffffffff);

  attack_chain(s, t, "a descriptor loop", [&](Driver& d, QueueArea&) {
    d.desc(t.queue, 0, d.queue(t.queue).buffers, 16, kWrite | kNext, 1);
    d.desc(t.queue, 1, d.queue(t.queue).buffers + 16, 16, kWrite | kNext, 0);
    d.publish(t.queue, 0);
  });
  attack_chain(s, t, "a descriptor that is its own next", [&](Driver& d, QueueArea&) {
    d.desc(t.queue, 0, d.queue(t.queue).buffers, 16, kWrite | kNext, 0);
    d.publish(t.queue, 0);
  });
  attack_chain(s, t, "a next index past the table", [&](Driver& d, QueueArea& a) {
    d.desc(t.queue, 0, a.buffers, 16, kWrite | kNext, a.size);
    d.publish(t.queue, 0);
  });
  attack_chain(s, t, "a next index of 0xffff", [&](Driver& d, QueueArea& a) {
    d.desc(t.queue, 0, a.buffers, 16, kWrite | kNext, 0xffff);
    d.publish(t.queue, 0);
  });
  attack_chain(s, t, "a head index past the table",
               [&](Driver& d, QueueArea& a) { d.publish(t.queue, a.size); });
  attack_chain(s, t, "a head index of 0xffff",
               [&](Driver& d, QueueArea&) { d.publish(t.queue, 0xffff); });
  attack_chain(s, t, "avail idx a whole ring plus one ahead", [&](Driver& d, QueueArea& a) {
    d.desc(t.queue, 0, a.buffers, 16, kWrite);
    d.set_avail_idx(t.queue, static_cast<uint16_t>(a.size + 1));
  });
  attack_chain(s, t, "avail idx moved backwards (0xffff)", [&](Driver& d, QueueArea& a) {
    d.desc(t.queue, 0, a.buffers, 16, kWrite);
    d.set_avail_idx(t.queue, 0xffff);
  });
  attack_chain(s, t, "a readable buffer after a writable one", [&](Driver& d, QueueArea& a) {
    d.desc(t.queue, 0, a.buffers, 16, kWrite | kNext, 1);
    d.desc(t.queue, 1, a.buffers + 16, 16, 0);
    d.publish(t.queue, 0);
  });

  // Indirect tables (2.7.5.3) in the queue's spare page.
  const auto indirect = [&](const std::string& name, uint64_t table, uint32_t table_len,
                            uint16_t flags, const std::function<void(Driver&, uint64_t)>& fill) {
    attack_chain(s, t, name, [&](Driver& d, QueueArea& a) {
      fill(d, a.spare);
      d.desc(t.queue, 0, table == 0 ? a.spare : table, table_len, kIndirect | flags);
      d.publish(t.queue, 0);
    });
  };
  const auto valid_entry = [](Driver& d, uint64_t table) {
    d.desc_in(table, 0, table + 0x800, 16, kWrite);
  };
  indirect("an indirect table inside an indirect table", 0, 32, 0, [](Driver& d, uint64_t table) {
    d.desc_in(table, 0, table + 0x800, 16, kWrite | kNext, 1);
    d.desc_in(table, 1, table + 0x400, 16, kIndirect);
  });
  indirect("an indirect table of length 0", 0, 0, 0, valid_entry);
  indirect("an indirect table of 24 bytes", 0, 24, 0, valid_entry);
  indirect("an indirect table of 2^20 entries", 0, 16U << 20, 0, valid_entry);
  indirect("an indirect table past the end of RAM", kRamBytes - 16, 32, 0, valid_entry);
  indirect("an indirect table wrapping 2^64", 0xffff'ffff'ffff'fff0ULL, 32, 0, valid_entry);
  indirect("an indirect descriptor with NEXT", 0, 16, kNext, valid_entry);
  indirect("a loop inside an indirect table", 0, 32, 0, [](Driver& d, uint64_t table) {
    d.desc_in(table, 0, table + 0x800, 16, kWrite | kNext, 1);
    d.desc_in(table, 1, table + 0x800, 16, kWrite | kNext, 0);
  });
  indirect("a next index past an indirect table", 0, 32, 0, [](Driver& d, uint64_t table) {
    d.desc_in(table, 0, table + 0x800, 16, kWrite | kNext, 2);
  });
  indirect("a buffer past the end of RAM in an indirect table", 0, 16, 0,
           [](Driver& d, uint64_t table) { d.desc_in(table, 0, kRamBytes, 64, kWrite); });

  QueueTarget without_indirect = t;
  without_indirect.features = t.features & ~kIndirectDesc;
  attack_chain(s, without_indirect, "an indirect table without VIRTIO_F_INDIRECT_DESC",
               [&](Driver& d, QueueArea& a) {
                 d.desc_in(a.spare, 0, a.spare + 0x800, 16, kWrite);
                 d.desc(t.queue, 0, a.spare, 16, kIndirect);
                 d.publish(t.queue, 0);
               });
}

}  // namespace dsec::test::hostile
