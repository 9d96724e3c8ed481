// Byte-wide register files, as the legacy PC devices have.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsec::devices {

// The legacy devices are 8-bit ISA devices: the chipset splits a wider port access into
// consecutive byte accesses, so a 16-bit OUT to port 0x3f8 writes the UART's THR (0x3f8) and
// then its IER (0x3f9). Calls fn(reg, i) for byte i of an access of `length` bytes at `offset`,
// for each byte that falls on one of `register_count` registers, lowest address first. Bytes
// past the last register are skipped; nothing here can overflow, whatever offset and length.
template <typename Fn>
void for_each_register(uint64_t offset, size_t length, uint64_t register_count, Fn&& fn) {
  for (size_t i = 0; i < length; ++i) {
    if (offset >= register_count || i >= register_count - offset) {
      return;
    }
    fn(offset + i, i);
  }
}

}  // namespace dsec::devices
