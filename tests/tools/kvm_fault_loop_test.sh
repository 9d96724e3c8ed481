#!/usr/bin/env bash
# Tests of tools/kvm-fault-loop with stand-in test binaries (no guest boots).
#   kvm_fault_loop_test.sh TOOL usage        - bad usage fails with status 2 (no root needed)
#   kvm_fault_loop_test.sh TOOL traced SCRATCH - a passing round and a failing one under the
#     KVM tracepoints: run as root where they exist (in the test bed, through the harness)
set -uo pipefail
tool=$1 mode=$2
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"

# A build directory whose tests/e2e_tests exits with `status`.
fake_build() {
  local dir=$1 status=$2
  mkdir -p "$dir/tests"
  printf '#!/bin/sh\necho "stand-in e2e_tests $*"\nexit %s\n' "$status" >"$dir/tests/e2e_tests"
  chmod +x "$dir/tests/e2e_tests"
}

case $mode in
  usage)
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    expect help 0 "--seconds N" -- "$tool" --help
    expect seconds 2 "--seconds needs a positive number" -- "$tool" --seconds 0
    expect option 2 "unknown option --bogus" -- "$tool" --bogus
    expect no-build 2 "build first" -- "$tool" --build-dir "$tmp/none"
    ;;
  traced)
    scratch=$3
    rm -rf "$scratch"; mkdir -p "$scratch"
    fake_build "$scratch/pass" 0
    fake_build "$scratch/fail" 1
    expect passes 0 "kvm-fault-loop: no failure in" -- \
      "$tool" --seconds 1 --build-dir "$scratch/pass" --out "$scratch/out-pass" 'A.*' 'B.*'
    expect fails 1 "round 1 done after" -- \
      "$tool" --seconds 60 --build-dir "$scratch/fail" --out "$scratch/out-fail" 'A.*'
    expect trace-kept 0 "tracer" -- head -n 1 "$scratch/out-fail/kvm.trace"
    expect test-output-kept 0 "stand-in e2e_tests --gtest_filter=A.*" -- cat "$scratch/out-fail/test-0.log"
    ;;
  *) echo "usage: $0 TOOL usage|traced SCRATCH" >&2; exit 2 ;;
esac
exit $((failures > 0))
