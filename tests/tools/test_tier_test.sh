#!/usr/bin/env bash
# Tests of tools/test-tier with a stand-in ctest that prints a made-up try: a test that
# fails on its assertion, a sanitizer report or a timeout fails the tier on its first try
# and is never run again; a try the test bed failed (the harness's TESTBED-FAULT line) is
# run again, alone, and the retry table of tools/test-retries names it with its fault; a
# test the test bed fails in every try fails the tier after $DSEC_TEST_TRIES tries.
#   test_tier_test.sh TOOLS_DIR
set -uo pipefail
tools=$1
unset DSEC_TEST_TRIES  # the default, 3, whatever the run around this test set
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/build"
# The stand-in: its Nth call prints $SCENARIO/N.out (or the last one there) and exits
# with the status in its first line, "rc=N"; each call's arguments go to $SCENARIO/calls.
cat >"$tmp/bin/ctest" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"$SCENARIO/calls"
n=$(wc -l <"$SCENARIO/calls")
while [[ ! -f $SCENARIO/$n.out ]]; do n=$((n - 1)); done
rc=$(head -n 1 "$SCENARIO/$n.out"); tail -n +2 "$SCENARIO/$n.out"; exit "${rc#rc=}"
EOF
chmod +x "$tmp/bin/ctest"

failed_try() { # failed_try NAME OUTPUT...: a try of one test that failed, as ctest prints it
  local name=$1; shift
  echo "rc=8"
  echo "      Start  7: $name"
  echo " 1/1 Test  #7: $name ..........***Failed    1.00 sec"
  printf '%s\n' "$@"
  echo ""
  echo "0% tests passed, 1 tests failed out of 1"
  echo ""
  echo "The following tests FAILED:"
  echo "	  7 - $name (Failed)"
  echo "Errors while running CTest"
}
passed_try() {
  echo "rc=0"
  echo " 1/1 Test  #7: $1 ..........   Passed    1.00 sec"
  echo "100% tests passed, 0 tests failed out of 1"
}
scenario() { # scenario NAME: a fresh directory for a stand-in's tries
  SCENARIO=$tmp/$1; export SCENARIO
  mkdir -p "$SCENARIO"; : >"$SCENARIO/calls"
}
calls() { wc -l <"$SCENARIO/calls"; }
tier() { PATH="$tmp/bin:$PATH" "$tools/test-tier" "$SCENARIO/run.log" "$tmp/build" e2e '^testbed\.stop$'; }
check_calls() { # check_calls NAME N
  if [[ $(calls) == "$2" ]]; then echo "ok   $1"; else
    echo "FAIL $1: ctest ran $(calls) times, want $2:"; sed 's/^/  | /' "$SCENARIO/calls"; failures=$((failures + 1)); fi
}

scenario assertion
failed_try Cli.Exits "tests/e2e/cli_test.cpp:40: Failure" "Expected equality of these values:" >"$SCENARIO/1.out"
passed_try Cli.Exits >"$SCENARIO/2.out"
expect assertion-fails 1 "cli_test.cpp:40: Failure" -- tier
check_calls assertion-one-try 1

scenario sanitizer
failed_try Asan.Uaf "==1==ERROR: AddressSanitizer: heap-use-after-free" "" \
  "kvm-harness: TESTBED-FAULT kind=kernel-fault status=1: BUG: soft lockup" >"$SCENARIO/1.out"
passed_try Asan.Uaf >"$SCENARIO/2.out"
expect sanitizer-fails 1 "AddressSanitizer" -- tier
check_calls sanitizer-never-retried 1

scenario timeout
{ echo "rc=8"; echo " 1/1 Test  #7: Slow.Test ..........***Timeout 1200.00 sec"
  printf '%s\n' "The following tests FAILED:" "	  7 - Slow.Test (Timeout)"; } >"$SCENARIO/1.out"
passed_try Slow.Test >"$SCENARIO/2.out"
expect timeout-fails 1 "Timeout" -- tier
check_calls timeout-one-try 1

scenario injected
failed_try Sandbox.Runs/0 "kvm-harness: the test-bed VM died while running: build/tests/e2e_tests" "" \
  "kvm-harness: TESTBED-FAULT kind=vm-died status=none: the test-bed VM died under build/tests/e2e_tests" \
  >"$SCENARIO/1.out"
passed_try Sandbox.Runs/0 >"$SCENARIO/2.out"
expect fault-retried 0 "test: rerunning what failed because the test bed failed under it (try 2 of 3): Sandbox.Runs/0" -- tier
check_calls fault-two-tries 2
expect fault-rerun-alone 0 "" -- grep -qF -- '-R ^(Sandbox\.Runs/0)$' "$SCENARIO/calls"
expect fault-named 0 "e2e ($tmp/build)" -- "$tools/test-retries" "$SCENARIO/run.log"
expect fault-named-kind 0 "vm-died" -- "$tools/test-retries" "$SCENARIO/run.log"

scenario always
failed_try Sandbox.Runs "kvm-harness: TESTBED-FAULT kind=kernel-fault status=0: BUG: TASK stack guard page was hit" \
  >"$SCENARIO/1.out"
DSEC_TEST_TRIES=2 expect faulted-every-try 1 \
  "test: the test bed failed under each of these in all 2 tries: Sandbox.Runs" -- tier
check_calls faulted-tries-bounded 2

# Two tests failed in one try, one on its own: the tier fails, and only the faulted one runs again.
scenario mixed
{ echo "rc=8"
  echo " 1/2 Test  #7: Cli.Exits ..........***Failed    1.00 sec"
  echo "tests/e2e/cli_test.cpp:40: Failure"
  echo " 2/2 Test  #8: Boot.Works ..........***Failed    1.00 sec"
  echo "kvm-harness: TESTBED-FAULT kind=nested-triple-fault status=1: vCPU 0 triple-faulted at RIP=0xfff0"
  printf '%s\n' "The following tests FAILED:" "	  7 - Cli.Exits (Failed)" "	  8 - Boot.Works (Failed)"
} >"$SCENARIO/1.out"
passed_try Boot.Works >"$SCENARIO/2.out"
expect mixed-fails 1 "rerunning what failed because the test bed failed under it (try 2 of 3): Boot.Works" -- tier
check_calls mixed-two-tries 2
expect mixed-rerun-alone 0 "" -- grep -qF -- '-R ^(Boot\.Works)$' "$SCENARIO/calls"

scenario clean
passed_try Cli.Prints >"$SCENARIO/1.out"
expect clean-passes 0 "100% tests passed" -- tier
check_calls clean-one-try 1
exit $((failures > 0))
