#!/usr/bin/env bash
# Every benchmark that docs/benchmarks.md and the README tell a reader to run, each at its
# smallest size, inside the test bed (run through kvm-harness exec): it must exit 0, print
# its figures beside its peer's, and leave JSON that parses. The pool's two benchmarks
# have tests of their own (benchmarks.pool_soak, benchmarks.pool). This keeps the pages'
# commands working; the figures of such short runs mean nothing.
set -uo pipefail
benchmarks=$1 build=$2
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
out=$build/benchmarks-short
rm -rf "$out"
mkdir -p "$out"

# bench NAME WANT_TEXT ARGS...: benchmarks/NAME ARGS with --build-dir and --out.
bench() {
  local name=$1 want=$2
  shift 2
  expect "$name" 0 "$want" -- timeout 600 "$benchmarks/$name" --build-dir "$build" \
    --out "$out/$name.json" "$@"
  expect "$name-json" 0 "json: ok" -- /usr/bin/python3 -c '
import json, sys
print("json: ok" if json.load(open(sys.argv[1])) else "json: empty")' "$out/$name.json"
}

bench boot-vs-qemu "VMM RSS excluding guest memory" --runs 1 --warmup 0 --vcpus 1 --memory 128
bench start-vs-qemu "ratio dsec-vmm / QEMU" --runs 1 --vcpus 1 --memory 128
bench sandbox-vs-qemu "exec \`true\` round trip" --rounds 1 --disk-mib 4 --rand-ops 50 --execs 3 \
  --stream-lines 1000
bench restore-vs-qemu "restore <= 0.2x QEMU's" --rounds 1 --clones 2 --vcpus 1 --memory 128
bench isolation-cost "ratios of the medians" --rounds 1 --vcpus 1 --memory 128
bench network "guest to host, MiB/s" --rounds 1 --mib 1
bench image-memory "Debian / default, host memory per sandbox" --count 2 --restores 1 --idle-s 1 --memory 128
exit $((failures > 0))
