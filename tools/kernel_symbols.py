"""A Linux kernel's text symbols and the function at an address.

Shared by tools/guest-profile (a guest kernel's symbols, from `nm -n` or a System.map) and
tools/testbed-vcpus (the test-bed kernel's, from /proc/kallsyms). All three list one
symbol per line as `ADDRESS TYPE NAME [MODULE]`.
"""

import bisect
import collections

# Addresses from here up are the kernel's half of the x86-64 address space.
KERNEL_HALF = 0xFFFF800000000000

_TEXT_TYPES = ("t", "T", "w", "W")


def parse_text_symbols(lines):
    """(address, name) of the text symbols among the lines, sorted by address."""
    symbols = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[1] in _TEXT_TYPES:
            try:
                symbols.append((int(fields[0], 16), fields[2]))
            except ValueError:
                continue
    symbols.sort()
    return symbols


def parse_symbol_addresses(lines, names):
    """{name: address} for those of the names the lines list, text or data alike."""
    wanted = set(names)
    found = {}
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in wanted and fields[2] not in found:
            try:
                found[fields[2]] = int(fields[0], 16)
            except ValueError:
                continue
    return found


class SymbolTable:
    """Names the function an address falls in: the nearest symbol at or below it."""

    def __init__(self, symbols):
        self.addresses = [address for address, _ in symbols]
        # A static function the compiler copied into several files (a kernel has about
        # twenty `wrmsrl`s) would add up under one name: those get their address too.
        counts = collections.Counter(name for _, name in symbols)
        self.names = [name if counts[name] == 1 else f"{name}@{address:x}"
                      for address, name in symbols]

    def __bool__(self):
        return bool(self.addresses)

    def function_at(self, address):
        """The function's name, or None below the first symbol."""
        i = bisect.bisect_right(self.addresses, address) - 1
        return self.names[i] if i >= 0 else None
