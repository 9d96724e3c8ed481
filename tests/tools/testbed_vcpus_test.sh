#!/usr/bin/env bash
# Unit tests of tools/testbed-vcpus against a stand-in QEMU monitor (a Unix socket that
# answers `info registers -a` with canned registers of two vCPUs): each vCPU's RIP, CPL,
# CR3 and halted state, the function from a made-up symbol map, every sample asked for;
# and a monitor that is not there fails with exit status 2 and a message. No KVM.
set -uo pipefail
tool=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT

cat >"$tmp/kallsyms" <<'MAP'
ffffffff81a5a100 T native_queued_spin_lock_slowpath
ffffffff81a5a300 t some_other_function
ffffffff81c00b80 T asm_exc_int3
MAP
# QEMU 7.2's layout: a CPU#N line, then RIP ... CPL=.. HLT=.., and CR3 further down.
python3 - "$tmp/monitor.sock" <<'PY' &
import socket, sys
regs = """CPU#0
RAX=0000000000000000 RBX=0000000000000000 RCX=0000000000000000 RDX=0000000000000000
RIP=ffffffff81c00ba0 RFL=00000046 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=0
CR0=80050033 CR2=0000000000000000 CR3=0000000100862000 CR4=00350ef0
CPU#1
RAX=0000000000000000 RBX=0000000000000000 RCX=0000000000000000 RDX=0000000000000000
RIP=ffffffff81a5a170 RFL=00000002 [-------] CPL=0 II=0 A20=1 SMM=0 HLT=1
CR0=80050033 CR2=0000000000000000 CR3=0000000002a10000 CR4=00350ef0
"""
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1]); server.listen(1)
conn, _ = server.accept()
conn.sendall(b"QEMU 7.2.15 monitor - type 'help' for more information\r\n(qemu) ")
buf = b""
while True:
    data = conn.recv(4096)
    if not data:
        break
    buf += data
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        answer = regs if line.strip() == b"info registers -a" else "unknown command\r\n"
        conn.sendall(line + b"\r\n" + answer.replace("\n", "\r\n").encode() + b"(qemu) ")
PY
server=$!
for _ in $(seq 50); do [[ -S $tmp/monitor.sock ]] && break; sleep 0.1; done

out=$("$tool" --socket "$tmp/monitor.sock" --system-map "$tmp/kallsyms" --samples 2 2>&1)
check() { expect "$1" 0 "$2" -- echo "$out"; }
check spinning-vcpu "sample 1 vCPU 0: RIP ffffffff81c00ba0 CPL 0 CR3 0000000100862000 running  asm_exc_int3"
check halted-vcpu "sample 1 vCPU 1: RIP ffffffff81a5a170 CPL 0 CR3 0000000002a10000 halted  native_queued_spin_lock_slowpath"
check second-sample "sample 2 vCPU 1: RIP ffffffff81a5a170"
expect four-lines 0 "4" -- bash -c 'grep -c "^sample" <<<"$1"' _ "$out"

expect no-monitor 2 "no answer from the monitor at $tmp/none.sock" -- \
  "$tool" --socket "$tmp/none.sock"
expect bad-map 2 "cannot read the System.map $tmp/none" -- \
  "$tool" --socket "$tmp/monitor.sock" --system-map "$tmp/none"
expect bad-samples 2 "--samples needs a positive number" -- \
  "$tool" --socket "$tmp/monitor.sock" --samples 0

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
