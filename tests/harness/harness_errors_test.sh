#!/usr/bin/env bash
# Unit tests of tools/kvm-harness's error paths: each must fail with exit status 2 and a
# message that says what to do. They need no KVM and no VM.
set -uo pipefail
harness=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"

# No usable /dev/kvm and no QEMU: say what to install. PATH keeps bash and coreutils only.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
for tool in bash env sh cat mkdir readlink date dirname basename mktemp rm; do
  ln -s "$(command -v "$tool")" "$tmp/bin/$tool"
done
expect no-qemu 2 "install the package qemu-system-x86" -- \
  env PATH="$tmp/bin" DSEC_FORCE_EMULATE=1 "$harness" -- true

# A kernel package that cannot be downloaded: name it and say why.
expect bad-kernel-package 2 "could not download the test-bed kernel package 'linux-image-0.0.0-none-amd64'" -- \
  env DSEC_FORCE_EMULATE=1 DSEC_CACHE="$tmp/cache" DSEC_TESTBED_KERNEL_PKG=linux-image-0.0.0-none-amd64 \
  "$harness" -- true

# kernel-path: the bzImage where the harness keeps the test-bed kernel (what the unit
# test that parses it reads), or an error that says what to do; no download for a cached one.
fake=linux-image-9.9-fake-amd64
mkdir -p "$tmp/kcache/testbed/$fake/root/boot"
touch "$tmp/kcache/testbed/$fake/.unpacked"
expect kernel-path-missing 2 "no vmlinuz-* in $tmp/kcache/testbed/$fake/root/boot" -- \
  env DSEC_CACHE="$tmp/kcache" DSEC_TESTBED_KERNEL_PKG=$fake "$harness" kernel-path
touch "$tmp/kcache/testbed/$fake/root/boot/vmlinuz-9.9-fake-amd64"
expect kernel-path 0 "$tmp/kcache/testbed/$fake/root/boot/vmlinuz-9.9-fake-amd64" -- \
  env DSEC_CACHE="$tmp/kcache" DSEC_TESTBED_KERNEL_PKG=$fake "$harness" kernel-path

# Usage mistakes.
expect no-command 2 "needs a command after --" -- "$harness" run
expect bad-option 2 "unknown option '--bogus'" -- "$harness" start --bogus
expect no-session 2 "no started session" -- "$harness" exec --session "$tmp/none" -- true

[[ $failures -eq 0 ]] && echo "all harness error paths behave" || exit 1
