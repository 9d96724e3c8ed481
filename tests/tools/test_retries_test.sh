#!/usr/bin/env bash
# Tests of tools/test-retries on a made-up ctest log: only a try whose output has the
# harness's whole "kvm-harness: TESTBED-FAULT kind=..." line, and no sanitizer report, is
# one the test bed failed; the retry table names every retry with its fault, the docs
# tests' page reruns included, its counts are the tries ctest ran, and the same is kept as
# JSON; the failure lines of each test whose last try failed are printed.
#   test_retries_test.sh TOOL
set -uo pipefail
tool=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
log=$tmp/ctest.log
# tools.kvm_fault_loop: its test-bed VM died (the harness's line), rerun, passed.
# Cli.Exits: its own assertion, with fault-looking text in the middle of a line and the
#   harness's old unanchored sentence: not a fault.
# Fake.Echo: printed the harness's line indented (as a test of the harness shows it).
# Asan.Uaf: a sanitizer report beside a fault line: its own failure.
# Sandbox.Runs (e2e): two kernel faults, then its own assertion.
# Flood.Console (stress): a nested triple fault with the known signature, then passed.
# Slow.Test: a timeout under a healthy test bed.
# Cli.Exits again in the ASan build's kvm tier: a test of its own, not a retry.
cat >"$log" <<'LOG'
test: the kvm tier (build)
      Start  12: tools.kvm_fault_loop
 1/6 Test  #12: tools.kvm_fault_loop ..............***Failed    4.11 sec
kvm-harness: the test-bed VM died while running: tests/tools/kvm_fault_loop_test.sh; its console said:
[  153.542016] Kernel panic - not syncing: Fatal exception in interrupt

kvm-harness: TESTBED-FAULT kind=vm-died status=none: the test-bed VM died under tests/tools/kvm_fault_loop_test.sh
      Start 800: Cli.Prints
 2/6 Test #800: Cli.Prints ........................   Passed   12.15 sec
      Start 801: Cli.Exits
 3/6 Test #801: Cli.Exits .........................***Failed    1.01 sec
tests/e2e/cli_test.cpp:40: Failure
Expected equality of these values:
  status
    Which is: 1
  0
stderr was: kvm-harness: TESTBED-FAULT kind=vm-died status=none: quoted
kvm-harness: the test-bed kernel logged a fault while running: x (its exit status was 1)
[  FAILED  ] Cli.Exits (1000 ms)
      Start 802: Fake.Echo
 4/6 Test #802: Fake.Echo .........................***Failed    1.01 sec
FAIL harness: the output was:
  | kvm-harness: TESTBED-FAULT kind=kernel-fault status=1: BUG: soft lockup
  |  1/1 Test  #9: Quoted.Try ..........   Passed    1.00 sec
      Start 803: Asan.Uaf
 5/6 Test #803: Asan.Uaf ..........................***Failed    1.01 sec
==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010
SUMMARY: AddressSanitizer: heap-use-after-free vmm/devices/virtio/queue.cpp:88

kvm-harness: TESTBED-FAULT kind=kernel-fault status=1: BUG: soft lockup - CPU#1 stuck for 22s!
      Start 804: Slow.Test
 6/6 Test #804: Slow.Test .........................***Timeout 1200.00 sec

50% tests passed, 5 tests failed out of 6

The following tests FAILED:
	 12 - tools.kvm_fault_loop (Failed)
	801 - Cli.Exits (Failed)
	802 - Fake.Echo (Failed)
	803 - Asan.Uaf (Failed)
	804 - Slow.Test (Timeout)
Errors while running CTest
test: rerunning what failed because the test bed failed under it (try 2 of 3): tools.kvm_fault_loop
      Start  12: tools.kvm_fault_loop
 1/1 Test  #12: tools.kvm_fault_loop ..............   Passed    4.00 sec
100% tests passed, 0 tests failed out of 1
test: the e2e tier (build)
      Start 888: Sandbox.Runs
 1/1 Test #888: Sandbox.Runs ......................***Failed   10.00 sec

kvm-harness: TESTBED-FAULT kind=kernel-fault status=0: BUG: TASK stack guard page was hit
0% tests passed, 1 tests failed out of 1
test: rerunning what failed because the test bed failed under it (try 2 of 3): Sandbox.Runs
 1/1 Test #888: Sandbox.Runs ......................***Failed   10.00 sec

kvm-harness: TESTBED-FAULT kind=kernel-fault status=1: Kernel panic - not syncing: corrupted stack end
0% tests passed, 1 tests failed out of 1
test: rerunning what failed because the test bed failed under it (try 3 of 3): Sandbox.Runs
 1/1 Test #888: Sandbox.Runs ......................***Failed   10.00 sec
tests/e2e/sandbox_test.cpp:12: Failure
Value of: ok
  Actual: false
0% tests passed, 1 tests failed out of 1
test: the stress tier (build)
      Start 887: Flood.Console
 1/1 Test #887: Flood.Console .....................***Failed   62.00 sec
vmm: the VM ended: a vCPU triple-faulted: vCPU 1 triple-faulted at RIP=0xfff0 RSP=0x0 RFLAGS=0x2 CR0=0x60000010 CS=0xf000:0xffff0000:0xffff:0x9b (the state of a vCPU just reset: ...)

kvm-harness: TESTBED-FAULT kind=nested-triple-fault status=1: vCPU 1 triple-faulted at RIP=0xfff0
0% tests passed, 1 tests failed out of 1
test: rerunning what failed because the test bed failed under it (try 2 of 3): Flood.Console
      Start 887: Flood.Console
 1/1 Test #887: Flood.Console .....................   Passed   62.00 sec
100% tests passed, 0 tests failed out of 1
test: the kvm tier (build-asan)
      Start 801: Cli.Exits
 1/1 Test #801: Cli.Exits .........................   Passed    1.00 sec
100% tests passed, 0 tests failed out of 1
LOG
reruns=$tmp/reruns.log
cat >"$reruns" <<'LOG'
doc_blocks: TESTBED-RERUN page=docs/api.md fault=kernel-fault
not a rerun: doc_blocks: TESTBED-RERUN page=README.md fault=vm-died
LOG
json=$tmp/retries.json

# Which tests of a try the test bed failed: the whole, unquoted line only, never beside a
# sanitizer report, never a timeout or an assertion of the test's own.
first_try=$tmp/kvm-try.log
sed -n '1,/^Errors while running CTest/p' "$log" >"$first_try"
expect faulted-only 0 "" -- bash -c "[[ \$('$tool' --testbed-faulted '$first_try') == tools.kvm_fault_loop ]]"
for own in Cli.Exits Fake.Echo Asan.Uaf Slow.Test; do
  expect "not-faulted-$own" 0 "" -- bash -c "! '$tool' --testbed-faulted '$first_try' | grep -qx '$own'"
done
# The last try counts: Sandbox.Runs's last failed on its own, so it is not run again.
expect faulted-last-try 0 "" -- bash -c "[[ -z \$('$tool' --testbed-faulted '$log') ]]"

# The table: one row per retry with its fault, the page rerun, counts of what ctest ran.
expect table-counts 0 "test: retries: 4 of 13 tries ctest ran (9 tests), and 1 docs page reruns" -- \
  "$tool" "$log" --reruns "$reruns" --json "$json"
out=$("$tool" "$log" --reruns "$reruns" --json "$json")
row() { # row NAME REGEX: a line of the table matches REGEX
  if grep -qE "$2" <<<"$out"; then echo "ok   $1"; else
    echo "FAIL $1: no line matching '$2' in:"; echo "$out" | sed 's/^/  | /'; failures=$((failures + 1)); fi
}
norow() {
  if ! grep -qE "$2" <<<"$out"; then echo "ok   $1"; else
    echo "FAIL $1: a line matches '$2' in:"; echo "$out" | sed 's/^/  | /'; failures=$((failures + 1)); fi
}
row retry-vm-died '^  kvm \(build\) +tools\.kvm_fault_loop +1  vm-died$'
row retry-kernel-fault-1 '^  e2e \(build\) +Sandbox\.Runs +1  kernel-fault$'
row retry-kernel-fault-2 '^  e2e \(build\) +Sandbox\.Runs +2  kernel-fault$'
row retry-triple-fault '^  stress \(build\) +Flood\.Console +1  nested-triple-fault$'
row retry-docs-page '^  e2e \(docs page\) +docs/api\.md +1  kernel-fault$'
norow docs-page-anchored 'README\.md'
norow no-unearned 'retried without a test-bed fault'
norow counts-agree 'misread'
norow asan-tier-apart 'Cli\.Exits +[0-9]+  '
expect finally-failed 0 "failed after every try: Cli.Exits Fake.Echo Asan.Uaf Slow.Test Sandbox.Runs" -- \
  "$tool" "$log"
expect why-gtest 0 "  Cli.Exits (kvm (build), try 1):
    tests/e2e/cli_test.cpp:40: Failure
    Expected equality of these values:
      status
        Which is: 1" -- "$tool" "$log"
expect why-sanitizer 0 "    ==4242==ERROR: AddressSanitizer: heap-use-after-free" -- "$tool" "$log"
expect why-last-try 0 "  Sandbox.Runs (e2e (build), try 3):
    tests/e2e/sandbox_test.cpp:12: Failure
    Value of: ok
      Actual: false" -- "$tool" "$log"
# A test that passed on its retry is not among the failures.
norow passed-on-retry '^  (Flood\.Console|tools\.kvm_fault_loop) \('

# The JSON holds the same.
expect json 0 "json: ok" -- python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
r = [(x["tier"], x["test"], x["try"], x["fault"]) for x in d["retries"]]
want = [("kvm (build)", "tools.kvm_fault_loop", 1, "vm-died"), ("e2e (build)", "Sandbox.Runs", 1, "kernel-fault"),
        ("e2e (build)", "Sandbox.Runs", 2, "kernel-fault"), ("stress (build)", "Flood.Console", 1, "nested-triple-fault")]
pages = [(p["page"], p["fault"]) for p in d["docs_page_reruns"]]
failed = {f["test"]: f for f in d["failed"]}
ok = (r == want and pages == [("docs/api.md", "kernel-fault")] and d["tries"] == 13 and d["tests"] == 9
      and failed["Asan.Uaf"]["sanitizer"] and failed["Slow.Test"]["timeout"] and len(failed) == 5)
print("json: ok" if ok else f"json: {d}")' "$json"

# A clean run: the table is printed, empty.
clean=$tmp/clean.log
printf '%s\n' 'test: the unit tier (build)' ' 1/1 Test   #1: Cli.Prints ..........   Passed    0.10 sec' \
  '100% tests passed, 0 tests failed out of 1' >"$clean"
: >"$tmp/no-reruns.log"
expect clean-table 0 "test: retries: 0 of 1 tries ctest ran (1 tests), and 0 docs page reruns
  tier                   test                                                       try  fault
  (none)" -- "$tool" "$clean" --reruns "$tmp/no-reruns.log"
# A log whose tries the table does not see as ctest counted them says so.
sed '/Test #800: Cli.Prints/d' "$log" >"$tmp/misread.log"
expect counts-disagree 0 "test: the table misread the log: ctest's own summaries count 13 tries, not 12" -- \
  "$tool" "$tmp/misread.log"
expect no-log 2 "cannot read" -- "$tool" "$tmp/missing.log"
# A harness test quotes the sanitizer report it feeds the harness ("  | "), then its fresh
# test-bed VM dies and it says so unquoted: the test bed's fault, run again (CI, b8f3afd).
quoted=$tmp/quoted.log
cat >"$quoted" <<'LOG'
test: the kvm tier (build)
      Start   5: harness.testbed_fault
 1/1 Test   #5: harness.testbed_fault ............***Failed   53.27 sec
== sanitizer (exit 3)
  | ==7==ERROR: AddressSanitizer: heap-use-after-free on address 0x1
ok   sanitizer-status
kvm-harness: TESTBED-FAULT kind=vm-died status=none: the test-bed VM died under bash -c echo after
0% tests passed, 1 tests failed out of 1
LOG
expect quoted-sanitizer-faulted 0 "" -- bash -c "[[ \$('$tool' --testbed-faulted '$quoted') == harness.testbed_fault ]]"
exit $((failures > 0))
