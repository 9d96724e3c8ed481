#!/usr/bin/env bash
# Tests of tools/test-retries on a made-up ctest log: tries counted per test, a test that
# passed on its retry not reported as failed, the test-bed-faulted tests listed, and the
# failure lines of each test whose last try failed printed.
#   test_retries_test.sh TOOL
set -uo pipefail
tool=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
log=$tmp/ctest.log
cat >"$log" <<'LOG'
test: the kvm tier (build)
      Start  12: tools.kvm_fault_loop
 1/3 Test  #12: tools.kvm_fault_loop ..............***Failed    4.11 sec
kvm-harness: the test-bed VM died while running: tests/tools/kvm_fault_loop_test.sh; its console said:
[  153.542016] Kernel panic - not syncing: Fatal exception in interrupt
      Start 800: Cli.Prints
 2/3 Test #800: Cli.Prints ........................   Passed   12.15 sec
      Start 801: Cli.Exits
 3/3 Test #801: Cli.Exits .........................***Failed    1.01 sec
tests/e2e/cli_test.cpp:40: Failure
Expected equality of these values:
  status
    Which is: 1
  0
[  FAILED  ] Cli.Exits (1000 ms)

67% tests passed, 2 tests failed out of 3

The following tests FAILED:
	 12 - tools.kvm_fault_loop (Failed)
	801 - Cli.Exits (Failed)
Errors while running CTest
test: rerunning what failed because the test bed failed under it: tools.kvm_fault_loop
      Start  12: tools.kvm_fault_loop
 1/1 Test  #12: tools.kvm_fault_loop ..............   Passed    4.00 sec
test: the e2e tier (build)
      Start 887: Flood.Console
 1/1 Test #887: Flood.Console .....................***Failed   62.00 sec
tests/e2e/trust_boundary_test.cpp:170: Failure
Expected: (rss_after) <= (rss_before + 1024), actual: 9000 vs 5000
before 3976 KiB, after 9000 KiB
      Start 887: Flood.Console
 1/1 Test #887: Flood.Console .....................   Passed   62.00 sec
      Start 888: Sandbox.Runs
 1/1 Test #888: Sandbox.Runs ......................***Failed   10.00 sec
kvm-harness: the test-bed kernel logged a fault while running: tests/e2e_tests (its exit status was 0); the fault lines:
 1/1 Test #888: Sandbox.Runs ......................***Failed   10.00 sec
kvm-harness: the test-bed kernel logged a fault while running: tests/e2e_tests (its exit status was 0); the fault lines:
 1/1 Test #888: Sandbox.Runs ......................***Failed   10.00 sec
tests/e2e/sandbox_test.cpp:12: Failure
Value of: ok
  Actual: false
LOG
expect retry-count 0 "retry count: 4 (failed tries per test: tools.kvm_fault_loop 1, Cli.Exits 1, Flood.Console 1, Sandbox.Runs 3)" -- "$tool" "$log"
expect faults-counted 0 "test-bed failures (VM died, hung or kernel fault): 3" -- "$tool" "$log"
expect finally-failed 0 "failed after every try: Cli.Exits Sandbox.Runs " -- "$tool" "$log"
expect why-gtest 0 "  Cli.Exits:
    tests/e2e/cli_test.cpp:40: Failure
    Expected equality of these values:
      status
        Which is: 1" -- "$tool" "$log"
expect why-last-try 0 "  Sandbox.Runs:
    tests/e2e/sandbox_test.cpp:12: Failure
    Value of: ok
      Actual: false" -- "$tool" "$log"
# A test that passed on its retry is not among the failures, nor are its lines printed.
out=$("$tool" "$log")
if [[ $out == *"Flood.Console:"* || $out == *"tools.kvm_fault_loop:"* ]]; then
  echo "FAIL passed-on-retry: a test that passed at last is reported:"; echo "$out" | sed 's/^/  | /'
  failures=$((failures + 1))
else
  echo "ok   passed-on-retry"
fi
# Only the tests whose last try failed under a failing test bed: kvm_fault_loop passed on
# its rerun, and Sandbox.Runs's last try failed on its own.
cut_log=$tmp/kvm-tier.log
sed -n '1,/^Errors while running CTest/p' "$log" >"$cut_log"
expect faulted-listed 0 "tools.kvm_fault_loop" -- "$tool" --testbed-faulted "$cut_log"
expect faulted-only 0 "" -- bash -c "[[ \$('$tool' --testbed-faulted '$cut_log') == tools.kvm_fault_loop ]]"
expect faulted-none 0 "" -- bash -c "[[ -z \$('$tool' --testbed-faulted '$log') ]]"
expect no-log 2 "cannot read" -- "$tool" "$tmp/missing.log"
exit $((failures > 0))
