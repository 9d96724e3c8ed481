#!/usr/bin/env bash
# tools/soak's two soaks, short, inside the test bed (run through kvm-harness exec): 24
# execs 8 at a time with a copy in and out every 8, then 2 boots. Each must end (the exec
# soak once waited for its own sandbox's VMM, for ever), count what it ran, see no
# failure, and find the VMM's fds and threads flat.
set -uo pipefail
soak=$1 build=$2
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

expect exec-soak-ends 0 "" -- timeout 300 "$soak" __inner-exec "$build" 24 8 8 "$tmp/exec.result"
line=$(head -n 1 "$tmp/exec.result" 2>/dev/null)
expect exec-soak-counts 0 "exec 24 copies=3 fail=0 " -- cat "$tmp/exec.result"
before=${line#*before=}; before=${before%% *}
after=${line#*after=}; after=${after%% *}
expect exec-soak-fds-threads-flat 0 "" -- test -n "$before" -a "${before%,*}" = "${after%,*}"

expect boot-soak-ends 0 "" -- timeout 600 "$soak" __inner-boot "$build" 2 "$tmp/boot.result"
expect boot-soak-counts 0 "boot 2 fail=0 " -- cat "$tmp/boot.result"
exit $((failures > 0))
