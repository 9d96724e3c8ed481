#!/usr/bin/env bash
# Creates and destroys VMs in a started test-bed session, hundreds in a row, as a test
# suite's guests do over an hour: each with an in-kernel irqchip and a vCPU, and one
# without, so that every static key KVM moves with its guests (tools/testbed-pin-static-keys)
# would be patched each round if the test bed did not hold them on. Unpinned, the test
# bed wedged within a few hundred rounds in six tries of six
# (docs/kvm-test-bed-faults.md); the harness then fails the command (exit 2). Where /dev/kvm
# works natively the same churn must simply pass.
set -uo pipefail
harness=$1 session=$2 rounds=${3:-300}
churn='
import fcntl, os, sys
KVM_CREATE_VM, KVM_CREATE_VCPU, KVM_CREATE_IRQCHIP = 0xAE01, 0xAE41, 0xAE60
rounds = int(sys.argv[1])
for _ in range(rounds):
    kvm = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    fds = []
    with_apic = fcntl.ioctl(kvm, KVM_CREATE_VM, 0)
    fcntl.ioctl(with_apic, KVM_CREATE_IRQCHIP, 0)
    fds += [with_apic, fcntl.ioctl(with_apic, KVM_CREATE_VCPU, 0)]
    without_apic = fcntl.ioctl(kvm, KVM_CREATE_VM, 0)
    fds += [without_apic, fcntl.ioctl(without_apic, KVM_CREATE_VCPU, 0)]
    for fd in reversed(fds + [kvm]):
        os.close(fd)
print(f"{rounds} rounds of VMs created and destroyed")
'
start=$SECONDS
out=$("$harness" exec --session "$session" --timeout 300 -- python3 -c "$churn" "$rounds" 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
fail=0
[[ $rc -eq 0 ]] || { echo "FAIL: exit status $rc, want 0 (2: the test-bed VM died or hung; 3: its kernel logged a fault)"; fail=1; }
[[ $out == *"$rounds rounds of VMs created and destroyed"* ]] || { echo "FAIL: the churn did not finish"; fail=1; }
[[ $fail -eq 0 ]] && echo "$rounds rounds of VMs in $((SECONDS - start)) s, the test bed up throughout"
exit $fail
