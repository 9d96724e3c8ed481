// How the guest kernel learns of a virtio-mmio device without ACPI or a device tree: a
// `virtio_mmio.device=` parameter on its command line (CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES).
#pragma once

#include <cstdint>
#include <string>

namespace dsec::virtio {

// "virtio_mmio.device=<size>@<base>:<irq>" for a register window at guest-physical
// `base` of `size` bytes (one 4 KiB slot by default) raising IOAPIC pin `irq`, in the form
// Linux's vm_cmdline_set() parses: size with memparse (a K suffix when it is whole KiB),
// base in hex, irq in decimal. E.g. "virtio_mmio.device=4K@0xc0000000:5".
std::string virtio_mmio_cmdline_arg(uint64_t base, uint32_t irq, uint64_t size = 4096);

}  // namespace dsec::virtio
