#!/usr/bin/env bash
# A test-bed VM that is not ready in time is booted once more, and a second miss is a
# clear error: a ready limit of 1 s, which no boot meets.
set -uo pipefail
harness=$1 session=$2
trap '"$harness" stop --session "$session" >/dev/null 2>&1 || true' EXIT
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
exit $fail
