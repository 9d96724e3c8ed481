#!/usr/bin/env bash
# Unit tests of tools/testbed-vcpus against a stand-in QEMU monitor (a Unix socket that
# answers `info registers -a` with canned registers of two vCPUs, and `xp` from a made-up
# physical memory): each vCPU's RIP, CPL, CR3 and halted state, the function from a
# made-up symbol map, every sample asked for; the code bytes at each RIP, read at the
# physical address of the kernel's image, with an int3 marked; the live-patching state
# decoded from bp_desc and its site; and a monitor that is not there fails with exit
# status 2 and a message. No KVM.
set -uo pipefail
tool=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT

cat >"$tmp/kallsyms" <<'MAP'
ffffffff81a5a100 T native_queued_spin_lock_slowpath
ffffffff81a5a300 t some_other_function
ffffffff81c00b80 T asm_exc_int3
ffffffff81000000 T _stext
ffffffff82e00000 b bp_desc
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
# Physical memory: the kernel image's virtual address less 0xffffffff80000000.
memory = {
    0x1c00ba0: bytes.fromhex("0f01f8 6a ff 4883ec"),  # asm_exc_int3's first bytes
    0x1a5a170: bytes.fromhex("cc 1f440000 488b45"),  # an int3 at vCPU 1's RIP
    # bp_desc: vec ffffffff82e00100, nr_entries 1, refs 2
    0x2e00000: bytes.fromhex("0001e082ffffffff 01000000 02000000"),
    # one text_poke_loc: rel_addr 0xa5a170, disp 0, len 5, opcode e9, text, old 0f
    0x2e00100: bytes.fromhex("70a1a500 00000000 05 e9 e911223344 0f"),
}
def xp(count, address):
    for base, data in memory.items():
        if base <= address < base + len(data):
            chunk = data[address - base:address - base + count]
            lines = [chunk[i:i + 8] for i in range(0, len(chunk), 8)]
            return "".join(f"{address + 8 * i:016x}: " + " ".join(f"0x{b:02x}" for b in line)
                           + "\n" for i, line in enumerate(lines))
    return "Cannot access memory\n"
def answer(line):
    if line == "info registers -a":
        return regs
    words = line.split()
    if len(words) == 3 and words[0] == "xp" and words[1].endswith("xb"):
        return xp(int(words[1][1:-2]), int(words[2], 16))
    return "unknown command\n"
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
        reply = answer(line.strip().decode())
        conn.sendall(line + b"\r\n" + reply.replace("\n", "\r\n").encode() + b"(qemu) ")
PY
server=$!
for _ in $(seq 50); do [[ -S $tmp/monitor.sock ]] && break; sleep 0.1; done

out=$("$tool" --socket "$tmp/monitor.sock" --system-map "$tmp/kallsyms" --samples 2 2>&1)
check() { expect "$1" 0 "$2" -- echo "$out"; }
check spinning-vcpu "sample 1 vCPU 0: RIP ffffffff81c00ba0 CPL 0 CR3 0000000100862000 running  asm_exc_int3"
check halted-vcpu "sample 1 vCPU 1: RIP ffffffff81a5a170 CPL 0 CR3 0000000002a10000 halted  native_queued_spin_lock_slowpath"
check second-sample "sample 2 vCPU 1: RIP ffffffff81a5a170"
expect four-lines 0 "4" -- bash -c 'grep -c "^sample" <<<"$1"' _ "$out"
check code-at-rip "code at ffffffff81c00ba0 asm_exc_int3: 0f 01 f8 6a ff 48 83 ec"
check int3-at-rip "code at ffffffff81a5a170 native_queued_spin_lock_slowpath: cc 1f 44 00 00 48 8b 45  (an int3)"
check patching "live patching under way: bp_desc.refs 2, 1 site(s) at ffffffff82e00100"
check patch-site "site ffffffff81a5a170 native_queued_spin_lock_slowpath: 5 byte(s) becoming e9 11 22 33 44 (first byte was 0f), in memory now cc 1f 44 00 00"

expect no-monitor 2 "no answer from the monitor at $tmp/none.sock" -- \
  "$tool" --socket "$tmp/none.sock"
expect bad-map 2 "cannot read the System.map $tmp/none" -- \
  "$tool" --socket "$tmp/monitor.sock" --system-map "$tmp/none"
expect bad-samples 2 "--samples needs a positive number" -- \
  "$tool" --socket "$tmp/monitor.sock" --samples 0

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
