#include "vmm/devices/virtio/mmio_cmdline.h"

#include <fmt/format.h>

namespace dsec::virtio {

std::string virtio_mmio_cmdline_arg(uint64_t base, uint32_t irq, uint64_t size) {
  const std::string size_text =
      size != 0 && size % 1024 == 0 ? fmt::format("{}K", size / 1024) : fmt::format("{}", size);
  return fmt::format("virtio_mmio.device={}@{:#x}:{}", size_text, base, irq);
}

}  // namespace dsec::virtio
