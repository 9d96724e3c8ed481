#!/usr/bin/env bash
# Unit tests of tools/kvm-exit-trace's summary on a made-up trace in the kernel's format:
# exits counted by reason and timed from the start mark, MMIO by page, port I/O by port,
# MSRs, exits to the VMM; bad input fails with exit status 2 and a message. No KVM (the
# recording needs root and tracefs: the e2e tier's users run it in the test bed).
set -uo pipefail
tool=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/trace" <<'TRACE'
# tracer: nop
#
    kvm-exit-trace-662     [001] .....    10.000000: tracing_mark_write: kvm-exit-trace: START
            dsec-690     [000] .....    10.100000: kvm_exit: vcpu 0 reason cpuid rip 0x1000 info1 0x0 info2 0x0 intr_info 0x00000000 error_code 0x00000000
            dsec-690     [000] .....    10.200000: kvm_exit: vcpu 0 reason npf rip 0xffffffff81023ea8 info1 0x000000010000000e info2 0x00000000fec00000 intr_info 0x00000000 error_code 0x00000000
            dsec-690     [000] .....    10.200100: kvm_mmio: mmio write len 4 gpa 0xfec00000 val 0x10
            dsec-690     [000] .....    10.300000: kvm_exit: vcpu 0 reason npf rip 0xffffffff81023eaa info1 0x000000010000000c info2 0x00000000fec00010 intr_info 0x00000000 error_code 0x00000000
            dsec-690     [000] .....    10.300100: kvm_mmio: mmio read len 4 gpa 0xfec00010 val 0x0
            dsec-690     [000] .....    10.400000: kvm_exit: vcpu 0 reason io rip 0xffffffff811bbf07 info1 0x0000000003f80010 info2 0x0 intr_info 0x00000000 error_code 0x00000000
            dsec-690     [000] .....    10.400100: kvm_pio: pio_write at 0x3f8 size 1 count 1 val 0x64 
            dsec-690     [000] .....    10.400200: kvm_userspace_exit: reason KVM_EXIT_IO (2)
            dsec-690     [000] .....    10.500000: kvm_exit: vcpu 0 reason msr rip 0xffffffff81024f86 info1 0x1 info2 0x0 intr_info 0x00000000 error_code 0x00000000
            dsec-690     [000] .....    10.500100: kvm_msr: msr_write 6e0 = 0x1234
    kvm-exit-trace-662     [001] .....    10.750000: tracing_mark_write: kvm-exit-trace: END
TRACE

expect totals 0 "5 exits, 1 of them to the VMM" -- "$tool" --summarize "$tmp/trace"
expect timing 0 "first exit at 100 ms, last at 500 ms, the command ended at 750 ms (from the command's start)" -- \
  "$tool" --summarize "$tmp/trace"
expect reasons 0 "        2  npf" -- "$tool" --summarize "$tmp/trace"
expect mmio-write 0 "        1  0xfec00000 page write" -- "$tool" --summarize "$tmp/trace"
expect mmio-read 0 "        1  0xfec00000 page read" -- "$tool" --summarize "$tmp/trace"
expect pio 0 "        1  port 0x3f8 write" -- "$tool" --summarize "$tmp/trace"
expect msr 0 "        1  msr 6e0 write" -- "$tool" --summarize "$tmp/trace"
expect userspace 0 "        1  KVM_EXIT_IO" -- "$tool" --summarize "$tmp/trace"

printf '# tracer: nop\n' >"$tmp/empty"
expect no-exits 2 "no kvm_exit events" -- "$tool" --summarize "$tmp/empty"
expect missing 2 "cannot read the trace" -- "$tool" --summarize "$tmp/none"
expect no-command 2 "no command" -- "$tool"
expect both 2 "not both" -- "$tool" --summarize "$tmp/trace" -- true

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
