#!/usr/bin/env bash
# A test-bed VM that is not ready in time, or whose kernel panics while it boots, is booted
# once more, and a second miss is a clear error: a ready limit of 1 s, which no boot meets,
# then an initramfs init that does not exist, which panics every boot.
set -uo pipefail
harness=$1 session=$2
# Its own log of retried boots: tools/test's lists only the run's real ones.
export DSEC_TESTBED_BOOT_LOG="$session.boot-retries.log"
: >"$DSEC_TESTBED_BOOT_LOG"
trap '"$harness" stop --session "$session" >/dev/null 2>&1 || true; rm -f "$DSEC_TESTBED_BOOT_LOG"' EXIT
out=$(DSEC_FORCE_EMULATE=1 DSEC_TESTBED_READY_S=1 "$harness" start --session "$session" 2>&1)
rc=$?
fail=0
[[ $rc -eq 2 ]] || { echo "FAIL: exit status $rc, want 2"; fail=1; }
[[ $(grep -c "was not ready after 1 s; its console said" <<<"$out") -eq 2 ]] ||
  { echo "FAIL: want two boots reported not ready"; fail=1; }
[[ $out == *"booting the test-bed VM once more"* ]] || { echo "FAIL: no second boot"; fail=1; }
[[ $out == *"was not ready after 1 s, twice"* ]] || { echo "FAIL: no final error"; fail=1; }
if [[ -f "$session/qemu.pid" ]] && kill -0 "$(cat "$session/qemu.pid")" 2>/dev/null; then
  echo "FAIL: a test-bed VM was left running"; fail=1
fi
echo "$out" | sed 's/^/  | /'
[[ $fail -eq 0 ]] && echo "a test-bed VM that was not ready in time was booted once more, then given up"

out=$(DSEC_FORCE_EMULATE=1 DSEC_TESTBED_APPEND=rdinit=/nonexistent "$harness" start --session "$session" 2>&1)
rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL: panic: exit status $rc, want 2"; fail=1; }
[[ $(grep -c "test-bed kernel panicked while booting (a test-bed fault" <<<"$out") -eq 2 ]] ||
  { echo "FAIL: want two boots reported panicked"; fail=1; }
[[ $out == *"Kernel panic - not syncing"* ]] || { echo "FAIL: the panic line not shown"; fail=1; }
[[ $out == *"booting the test-bed VM once more"* ]] || { echo "FAIL: no second boot after a panic"; fail=1; }
[[ $out == *"panicked while booting, twice"* ]] || { echo "FAIL: no final error after two panics"; fail=1; }
[[ $(grep -c "not ready after 1 s$" "$DSEC_TESTBED_BOOT_LOG") -eq 1 &&
  $(grep -c "its kernel panicked while booting$" "$DSEC_TESTBED_BOOT_LOG") -eq 1 ]] ||
  { echo "FAIL: want each retried boot in \$DSEC_TESTBED_BOOT_LOG, once:"; cat "$DSEC_TESTBED_BOOT_LOG"; fail=1; }
echo "$out" | sed 's/^/  | /'
[[ $fail -eq 0 ]] && echo "a test-bed kernel that panicked while booting was booted once more, then given up"
exit $fail
