#!/usr/bin/env bash
# A test-bed VM that wedges mid-command is noticed, restarted, and the command runs once
# more there: its own session, frozen with SIGSTOP, and a short hang limit.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/own_session.sh"
first_pid=$(cat "$session/qemu.pid")
# The command records each attempt; the first one freezes the whole VM from the host.
(
  while [[ ! -s "$scratch/attempts" ]]; do sleep 0.2; done
  pkill -STOP -g "$first_pid"
) &
out=$(DSEC_TESTBED_HANG_S=10 "$harness" exec --session "$session" -- bash -c \
  'echo attempt >> "$0/attempts"; sleep 3; echo finished' "$scratch" 2>&1)
rc=$?
fail=0
[[ $rc -eq 0 ]] || { echo "FAIL: exit status $rc, want 0 from the second attempt"; fail=1; }
[[ $out == *"hung (no heartbeat for 10 s)"* ]] || { echo "FAIL: the hang was not reported"; fail=1; }
[[ $out == *"restarting the test bed"* ]] || { echo "FAIL: no restart was reported"; fail=1; }
[[ $out == *finished* ]] || { echo "FAIL: the command did not finish on the restarted bed"; fail=1; }
[[ $(cat "$session/qemu.pid") != "$first_pid" ]] || { echo "FAIL: the VM was not replaced"; fail=1; }
[[ $(wc -l <"$scratch/attempts") -eq 2 ]] || { echo "FAIL: want 2 attempts, saw $(wc -l <"$scratch/attempts")"; fail=1; }
echo "$out" | sed 's/^/  | /'
[[ $fail -eq 0 ]] && echo "a wedged test bed was detected, restarted, and the command ran again"
exit $fail
