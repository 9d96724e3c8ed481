// The hostile guest against the virtio-mmio transport (virtio 1.2, 4.2 and 3.1): status and
// feature negotiation out of order, queue setup with bad sizes and ring addresses, changes
// to a live queue, registers at odd widths and offsets, configuration space out of range,
// notification floods and accesses where no device is. After each attack the device
// serves a valid request, after a reset only where it had to refuse work.
#include <gtest/gtest.h>

#include "tests/hostile/attacks.h"

namespace dsec::test::hostile {
namespace {

constexpr uint32_t kLive = kAcknowledge | kDriver | kFeaturesOk | kDriverOk;

// Status writes the transport must ignore, and bits it must not let the driver set.
void status_abuse(Script& s, Driver& d) {
  s.label("DRIVER_OK before FEATURES_OK is ignored");
  d.reset();
  d.write_reg(reg::kStatus, kAcknowledge);
  d.write_reg(reg::kStatus, kAcknowledge | kDriver);
  d.write_reg(reg::kStatus, kAcknowledge | kDriver | kDriverOk);
  d.expect_status(kAcknowledge | kDriver);

  s.label("clearing a status bit is ignored");
  d.write_features(kVersion1);
  d.write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk);
  d.write_reg(reg::kStatus, kAcknowledge);
  d.expect_status(kAcknowledge | kDriver | kFeaturesOk);

  s.label("unknown status bits are ignored");
  d.write_reg(reg::kStatus, 0xffffffff);
  d.write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk | 0x100);
  d.expect_status(kAcknowledge | kDriver | kFeaturesOk);

  s.label("the driver cannot set DEVICE_NEEDS_RESET");
  d.write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk | kNeedsReset);
  d.expect_status(kAcknowledge | kDriver | kFeaturesOk);

  s.label("after FAILED only a reset is taken");
  d.write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk | kFailed);
  d.expect_status(kAcknowledge | kDriver | kFeaturesOk | kFailed);
  d.setup_queue(0);
  d.write_reg(reg::kStatus, kLive | kFailed);
  d.expect_status(kAcknowledge | kDriver | kFeaturesOk | kFailed);
  d.expect_reg(reg::kQueueReady, 0);

  s.label("DRIVER_OK written twice changes nothing");
  d.init();
  d.driver_ok();
  d.expect_status(kLive);
  rng_request(d);
}

void feature_abuse(Script& s, Driver& d) {
  const auto refused = [&](const std::string& name, uint64_t features) {
    s.label(name);
    d.reset();
    d.write_reg(reg::kStatus, kAcknowledge);
    d.write_reg(reg::kStatus, kAcknowledge | kDriver);
    d.write_features(features);
    d.write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk);
    d.expect_status(kAcknowledge | kDriver);  // FEATURES_OK did not stick (3.1.1 step 6)
  };
  refused("a feature the device does not offer (bit 63) is refused", kVersion1 | 1ULL << 63);
  refused("every feature bit at once is refused", ~0ULL);
  refused("no VIRTIO_F_VERSION_1 is refused", kIndirectDesc);

  s.label("feature words past the second are ignored");
  d.reset();
  d.write_reg(reg::kStatus, kAcknowledge);
  d.write_reg(reg::kStatus, kAcknowledge | kDriver);
  d.write_features(kVersion1);
  for (uint32_t sel : {2U, 3U, 0xffffffffU}) {
    d.write_reg(reg::kDriverFeaturesSel, sel);
    d.write_reg(reg::kDriverFeatures, 0xffffffff);
  }
  d.write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk);
  d.expect_status(kAcknowledge | kDriver | kFeaturesOk);

  s.label("device feature words past the second read as zero");
  for (uint32_t sel : {2U, 0x80000000U, 0xffffffffU}) {
    d.write_reg(reg::kDeviceFeaturesSel, sel);
    d.expect_reg(reg::kDeviceFeatures, 0);
  }

  s.label("features written after FEATURES_OK are ignored");
  d.write_features(~0ULL);
  for (uint16_t q = 0; q < d.queue_count(); ++q) d.setup_queue(q);
  d.driver_ok();
  d.expect_status(kLive);
  rng_request(d);
}

void queue_setup_abuse(Script& s, Driver& d) {
  s.label("queue setup before FEATURES_OK is ignored");
  d.reset();
  d.write_reg(reg::kStatus, kAcknowledge);
  d.write_reg(reg::kStatus, kAcknowledge | kDriver);
  d.setup_queue(0);
  d.expect_reg(reg::kQueueReady, 0);

  s.label("queues past the last read as absent and ignore writes");
  d.write_features(kVersion1 | kIndirectDesc);
  d.write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk);
  for (uint32_t sel : {1U, 7U, 0x10000U, 0xffffffffU}) {
    d.select(sel);
    d.expect_reg(reg::kQueueNumMax, 0);
    d.write_reg(reg::kQueueNum, 16);
    d.write_reg(reg::kQueueReady, 1);
    d.expect_reg(reg::kQueueReady, 0);
  }

  // A bad queue configuration makes DRIVER_OK fail: the device shows DEVICE_NEEDS_RESET
  // and serves nothing until the driver resets it.
  const auto refused = [&](const std::string& name, const std::function<void()>& misconfigure) {
    s.label(name);
    d.negotiate(kVersion1 | kIndirectDesc);
    d.setup_queue(0);
    misconfigure();
    d.desc(0, 0, d.queue(0).buffers, 64, kWrite);
    d.publish(0, 0);
    d.driver_ok();
    d.expect_status(kLive | kNeedsReset);
    d.notify(0);
    s.delay(20);
    d.expect_no_used(0);
  };
  for (uint32_t size : {0U, 3U, 24U, 512U, 0x10000U, 0xffffffffU}) {
    refused("queue size " + std::to_string(size) + " is refused",
            [&d, size] { d.write_reg(reg::kQueueNum, size); });
  }
  const QueueArea q = d.queue(0);
  const auto rings = [&](const std::string& name, uint64_t desc, uint64_t avail, uint64_t used) {
    refused(name, [&d, desc, avail, used] { d.write_ring_addresses(desc, avail, used); });
  };
  rings("a descriptor table past the end of RAM is refused", kRamBytes, q.avail, q.used);
  rings("an avail ring straddling the end of RAM is refused", q.desc, kRamBytes - 2, q.used);
  rings("a used ring on device registers is refused", q.desc, q.avail, kMmioBase);
  rings("a descriptor table wrapping 2^64 is refused", 0xffff'ffff'ffff'fff0ULL, q.avail, q.used);
  rings("a used ring wrapping 2^64 is refused", q.desc, q.avail, 0xffff'ffff'ffff'fffcULL);
  rings("a misaligned descriptor table is refused", q.desc + 8, q.avail, q.used);
  rings("a misaligned avail ring is refused", q.desc, q.avail + 1, q.used);
  rings("a misaligned used ring is refused", q.desc, q.avail, q.used + 2);

  s.label("a live queue's configuration cannot change");
  d.init();
  d.write_reg(reg::kQueueReady, 0);
  d.expect_reg(reg::kQueueReady, 1);
  d.write_reg(reg::kQueueNum, 3);
  d.write_ring_addresses(kRamBytes, 0xffff'ffff'ffff'fff0ULL, kMmioBase);
  d.select(0xffffffff);
  d.write_reg(reg::kQueueReady, 0);
  d.select(0);
  d.expect_reg(reg::kQueueReady, 1);
  rng_request(d);
}

// Registers accessed at widths and offsets other than 4 bytes aligned read as zero and
// ignore writes (4.2.2.2); read-only and reserved registers ignore writes.
void register_sweep(Script& s, Driver& d, uint32_t device_id) {
  s.label("device " + std::to_string(d.slot()) + ": registers at odd widths and offsets");
  for (uint32_t width : {1U, 2U, 8U}) {
    s.read(d.reg(0), width, 0x100 / width, width);
    s.write(d.reg(0), ~0ULL, width, 0x100 / width, width);
  }
  s.read(d.reg(1), 4, 0x40, 4);
  s.write(d.reg(1), ~0ULL, 4, 0x40, 4);
  s.expect(d.reg(reg::kMagic), 0, 1);
  s.expect(d.reg(reg::kMagic), 0, 2);
  s.expect(d.reg(reg::kMagic), 0, 8);
  s.expect(d.reg(reg::kMagic + 1), 0, 4);
  s.expect(d.reg(reg::kStatus), 0, 1);

  s.label("device " + std::to_string(d.slot()) +
          ": read-only and reserved registers ignore writes");
  for (uint64_t offset :
       {reg::kMagic, reg::kVersion, reg::kDeviceId, uint64_t{0x00c}, reg::kDeviceFeatures,
        reg::kQueueNumMax, reg::kInterruptStatus, uint64_t{0x0b0}, uint64_t{0x0b4}, uint64_t{0x0b8},
        uint64_t{0x0bc}, reg::kConfigGeneration, uint64_t{0x018}, uint64_t{0x0c0}}) {
    d.write_reg(offset, 0xffffffff);
  }
  d.expect_reg(reg::kMagic, 0x74726976);
  d.expect_reg(reg::kVersion, 2);
  d.expect_reg(reg::kDeviceId, device_id);
  d.expect_reg(reg::kInterruptStatus, 0);
  d.expect_status(kLive);
}

// The configuration space (from 0x100) past the device's own reads as zero, at any width,
// also an access that straddles its end; writes anywhere in it are the device's to ignore.
void config_sweep(Script& s, Driver& d) {
  s.label("device " + std::to_string(d.slot()) + ": configuration space out of range");
  s.read(d.reg(reg::kConfig), 8, (0x1000 - reg::kConfig) / 8, 8);
  s.read(d.reg(reg::kConfig), 1, 0x100, 1);
  s.read(d.reg(reg::kConfig + 1), 4, 0x40, 4);
  s.read(d.reg(0xffc), 4);
  s.read(d.reg(0xff8), 8);
  s.expect(d.reg(0x800), 0, 8);
  s.expect(d.reg(0xff8), 0, 8);
  s.write(d.reg(reg::kConfig), ~0ULL, 1, 0x100, 1);
  s.write(d.reg(reg::kConfig), ~0ULL, 8, (0x1000 - reg::kConfig) / 8, 8);
  s.write(d.reg(reg::kConfig + 3), ~0ULL, 4, 0x40, 4);
}

TEST(HostileTransport, StatusAndFeatureAbuseLeaveTheDeviceUsable) {
  HostileVm vm;
  run_batch(vm, "status and features", [](Script& s, Drivers& d) {
    status_abuse(s, d.rng);
    feature_abuse(s, d.rng);
  });
}

TEST(HostileTransport, QueueSetupAbuseIsRefusedUntilAReset) {
  HostileVm vm;
  run_batch(vm, "queue setup", [](Script& s, Drivers& d) {
    queue_setup_abuse(s, d.rng);
    d.rng.init();
    rng_request(d.rng);
  });
}

TEST(HostileTransport, RegisterAndConfigAbuseOfEveryDeviceChangesNothing) {
  HostileVm vm;
  run_batch(vm, "registers and configuration space", [](Script& s, Drivers& d) {
    const uint64_t cid = d.vsock.reg(reg::kConfig);
    const uint64_t capacity = d.block.reg(reg::kConfig);
    for (auto [driver, id] : {std::pair{&d.block, kBlockId}, std::pair{&d.vsock, kVsockId},
                              std::pair{&d.rng, kRngId}}) {
      driver->init();
      register_sweep(s, *driver, id);
      config_sweep(s, *driver);
      driver->expect_status(kLive);
    }
    s.label("read-only configuration stays as it was");
    s.expect(capacity, kDiskSectors, 8);  // virtio-blk capacity, in 512-byte sectors
    s.expect(cid, kGuestCid, 8);          // virtio-vsock guest_cid
    s.label("every device still serves requests");
    rng_request(d.rng);
    block_read(d.block, 7);
    vsock_post_rx(d.vsock);
    vsock_connect(d.vsock, 2000);
  });
}

TEST(HostileTransport, NotificationFloodsAndStrayNotificationsDoNoHarm) {
  HostileVm vm;
  run_batch(vm, "notifications", [](Script& s, Drivers& d) {
    Driver& rng = d.rng;
    s.label("notify before DRIVER_OK reaches no device");
    rng.negotiate(kVersion1);
    rng.setup_queue(0);
    rng.desc(0, 0, rng.queue(0).buffers, 64, kWrite);
    rng.publish(0, 0);
    rng.notify(0);
    s.delay(20);
    rng.expect_no_used(0);
    rng.driver_ok();
    rng.notify(0);
    rng.wait_used(0);

    s.label("20000 notifies with nothing published");
    s.write(rng.reg(reg::kQueueNotify), 0, 4, 20000);
    rng_request(rng);

    s.label("5000 notifies for one chain return it once");
    rng.desc(0, 0, rng.queue(0).buffers, 64, kWrite);
    rng.publish(0, 0);
    s.write(rng.reg(reg::kQueueNotify), 0, 4, 5000);
    rng.wait_used(0);
    s.delay(20);
    rng.expect_no_used(0);

    s.label("notifies of queues that do not exist");
    for (uint32_t q : {1U, 2U, 3U, 0xffffU, 0x10000U, 0xffffffffU}) {
      s.write(rng.reg(reg::kQueueNotify), q, 4, 300);
    }
    s.write(d.vsock.reg(reg::kQueueNotify), 3, 4, 300);
    s.write(d.block.reg(reg::kQueueNotify), 1, 4, 300);
    rng_request(rng);

    s.label("notify after a reset reaches no device");
    rng.desc(0, 0, rng.queue(0).buffers, 64, kWrite);
    rng.publish(0, 0);
    const uint64_t used_idx = rng.queue(0).used + 2;
    rng.write_reg(reg::kStatus, 0);
    rng.notify(0);
    s.delay(20);
    s.expect(used_idx, rng.queue(0).used_idx, 2);

    s.label("acknowledging interrupts that are not pending");
    rng.init();
    rng.write_reg(reg::kInterruptAck, 0xffffffff);
    rng_request(rng);
    rng.expect_used_interrupt();
    rng.write_reg(reg::kInterruptAck, 0xffffffff);
    rng.expect_reg(reg::kInterruptStatus, 0);
    rng_request(rng);
  });
}

TEST(HostileTransport, AccessesWhereNoDeviceIsDoNoHarm) {
  HostileVm vm;
  run_batch(vm, "nothing there", [](Script& s, Drivers& d) {
    d.rng.init();
    s.label("an empty virtio-mmio slot, the rest of the MMIO gap, and RAM that is not there");
    for (uint64_t addr : {kMmioBase + 0x1000 * 10, kMmioBase + 0x1000 * 19, uint64_t{0xd000'0000},
                          uint64_t{0x8000'0000}, kRamBytes, uint64_t{0xbfff'fff8}}) {
      for (uint32_t width : {1U, 2U, 4U, 8U}) {
        s.read(addr, width, 16, width);
        s.write(addr, ~0ULL, width, 16, width);
      }
    }
    rng_request(d.rng);
  });
}

}  // namespace
}  // namespace dsec::test::hostile
