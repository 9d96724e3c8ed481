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
# A sandbox whose agent did not answer while the pool still held it (its health checks see
# only the guest kernel accept): a stall only when its VMM answers SIGUSR1 (logs its state).
stalled() { # stalled yes|no: agent_stalled over a fake pool whose "VMM" logs on SIGUSR1 or not
  PYTHONDONTWRITEBYTECODE=1 python3 - "$benchmarks" "$1" <<'PY'
import subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import pool_host
log = Path(tempfile.mkdtemp()) / "sb-1.log"
log.write_text("")
on_usr1 = f"echo '{pool_host.VMM_ANSWERED_SIGUSR1}' >> {log}" if sys.argv[2] == "yes" else ""
vmm = subprocess.Popen(["bash", "-c", f"trap \"{on_usr1}\" USR1; while :; do sleep 0.1; done"])
time.sleep(0.5)
class FakePool:
    deleted = []
    def request(self, method, path, body=None):
        if method == "DELETE":
            self.deleted.append(path)
            return 204, None
        return 200, {"pid": vmm.pid}
pool = FakePool()
print(pool_host.agent_stalled(pool, "sb-1", log, wait_s=2), pool.deleted)
vmm.kill()
PY
}
expect stall-counted 0 "a guest stall: its agent did not answer, its VMM answered SIGUSR1; released ['/sandboxes/sb-1']" -- stalled yes
expect silent-vmm-not-counted 0 "None []" -- stalled no
exit $((failures > 0))
