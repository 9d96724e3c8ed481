#!/usr/bin/env bash
# benchmarks/pool_host.py's verdict on a sandbox the pool lost (what pool and pool-soak
# allow up to --max-guest-losses): a crash is the guest's doing only with the emulated test
# bed's signature (a vCPU that triple-faulted in the reset state, under DSEC_TESTBED=emulated);
# a guest panic, or the same triple fault where /dev/kvm is the host's own, is a failure.
#   pool_losses_test.sh BENCHMARKS_DIR
set -uo pipefail
benchmarks=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
verdict() { # verdict DSEC_TESTBED LOG_TAIL: what guest_side says of a VMM that exited 2
  env -u DSEC_TESTBED ${1:+DSEC_TESTBED=$1} PYTHONDONTWRITEBYTECODE=1 python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
import pool_host
print(pool_host.guest_side(pool_host.GUEST_CRASHED, sys.argv[2]))' "$benchmarks" "$2"
}
triple='[12:00:00.000] [error] VM ended: a vCPU triple-faulted: vCPU 1 triple-faulted at RIP=0xfff0 RSP=0x0 RFLAGS=0x2 CR0=0x60000010 CR2=0x0 CR3=0x0 CR4=0x0 EFER=0x0 CS=0xf000:0xffff0000:0xffff:0x9b SS=0x0:0x0:0xffff:0x93 (the state of a vCPU just reset: KVM on AMD reinitialises a vCPU that shut down before reporting it, so where the fault happened is lost) (exit status 2)'
panic='[12:00:00.000] [error] VM ended: the guest crashed: vCPU 0 reported a crash (exit status 2)'
other='[12:00:00.000] [error] VM ended: a vCPU triple-faulted: vCPU 0 triple-faulted at RIP=0xffffffff81000000 RSP=0x0 CS=0x10:0x0:0xffffffff:0xa09b (exit status 2)'
expect testbed-triple-fault 0 "a guest crash (the test bed's nested triple fault)" -- verdict emulated "$triple"
expect panic-fails 0 "None" -- verdict emulated "$panic"
expect other-triple-fault-fails 0 "None" -- verdict emulated "$other"
expect native-kvm-fails 0 "None" -- verdict "" "$triple"
exit $((failures > 0))
