#!/usr/bin/env bash
# Tests of tools/device-kit here, where no machine is lent: its usage errors, and a packed
# kit that works on its own. The kit's QEMU must load nothing from this host but glibc, and
# find its TCG module and microvm firmware inside the kit (a lent machine has no QEMU); the
# kit must hold everything the run there names. Needs what tools/test prepares: the build,
# the default image, Debian's stock kernel and qemu-system-x86.
set -uo pipefail
tool=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

expect no-command 2 "device-kit: takes dsec-vmm's benchmarks" -- "$tool"
expect bad-pack-arg 2 "pack: unknown argument '--bogus'" -- "$tool" pack --bogus
expect bad-runs 2 "--runs needs a positive number" -- "$tool" run --runs x --out "$tmp/r"
expect no-kit 2 "$tmp/none/kit.tar.xz is missing: run 'tools/device-kit pack'" -- \
  "$tool" run --kit "$tmp/none" --out "$tmp/r"

expect pack 0 "wrote $tmp/kit/kit.tar.xz" -- "$tool" pack --fast --out "$tmp/kit"
mkdir "$tmp/x"
tar -C "$tmp/x" -xJf "$tmp/kit/kit.tar.xz"
kit=$tmp/x/kit
missing=
for f in bin/dsec-vmm bin/dsec-vmm-pool bin/qemu-system-x86_64 bin/kvm_tests bin/e2e_tests bin/busybox \
  image/vmlinux image/bzImage image/initramfs.cpio share/qemu/bios-microvm.bin \
  lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so MANIFEST; do
  [[ -s $kit/$f ]] || missing+=" $f"
done
compgen -G "$kit/cache/testbed/linux-image-*/root/boot/vmlinuz-*" >/dev/null || missing+=" stock-kernel"
expect contents 0 "complete" -- bash -c "[[ -z '$missing' ]] && echo complete || echo 'missing:$missing'"
expect manifest 0 "binary_dir=" -- cat "$kit/MANIFEST"

# Every library the kit's binaries load, other than glibc's, comes from the kit.
for bin in qemu-system-x86_64 kvm_tests e2e_tests; do
  expect "libraries-$bin" 0 "all from the kit" -- bash -c "
    LD_LIBRARY_PATH='$kit/lib' ldd '$kit/bin/$bin' | awk '\$2 == \"=>\"' |
      grep -v -e '$kit/lib/' -e 'libc\.so' -e 'libm\.so' -e 'libpthread' -e 'libdl\.so' \
        -e 'librt\.so' -e 'libresolv' -e 'libutil\.so' -e 'libmvec' || echo 'all from the kit'"
done

# The kit's QEMU boots the kit's kernel as a microvm (TCG: no KVM here) with the kit's
# firmware and TCG module; still running at the deadline means it started.
expect qemu-starts 124 "" -- env LD_LIBRARY_PATH="$kit/lib" timeout 5 \
  "$kit/bin/qemu-system-x86_64" -M microvm,x-option-roms=off,isa-serial=on,rtc=off -accel tcg \
  -display none -nodefaults -no-user-config -kernel "$kit/image/vmlinux" -no-reboot

# Here /dev/kvm is missing or PVM's (no VMX/SVM): run stops before any boot, saying why.
if grep -q -w -E 'vmx|svm' /proc/cpuinfo; then
  echo "note: this CPU has VMX/SVM; run would boot guests here, so its refusal is not tested"
else
  expect run-refuses 2 "device-kit: error: this" -- "$tool" run --kit "$tmp/kit" --out "$tmp/r"
  expect run-summary 0 "vmx/svm flags: none" -- cat "$tmp/r/summary.txt"
fi

exit $((failures > 0))
