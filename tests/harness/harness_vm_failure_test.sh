#!/usr/bin/env bash
# A command under which the test-bed VM fails is failed, never run twice, and the session's
# next command gets a fresh VM. Its own session: first the VM is frozen with SIGSTOP under
# a short hang limit (exit 2, the hung VM ended), then the test-bed kernel logs a soft
# lockup while a command runs (exit 3 whatever the command's status, the fault lines shown).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/own_session.sh"
fail=0
check() { [[ $1 == ok ]] || { echo "FAIL: $2"; fail=1; }; }
first_pid=$(cat "$session/qemu.pid")
(
  while [[ ! -s "$scratch/attempts" ]]; do sleep 0.2; done
  pkill -STOP -g "$first_pid"
) &
out=$(DSEC_TESTBED_HANG_S=10 "$harness" exec --session "$session" -- bash -c \
  'echo attempt >> "$0/attempts"; sleep 3; echo finished' "$scratch" 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
check "$( [[ $rc -eq 2 ]] && echo ok)" "a hung VM: exit status $rc, want 2"
check "$( [[ $out == *"hung (no heartbeat for 10 s)"* ]] && echo ok)" "the hang was not reported"
check "$( [[ $out == *"ending the hung test-bed VM"* ]] && echo ok)" "the hung VM was not ended"
check "$(grep -q '^kvm-harness: TESTBED-FAULT kind=vm-hung status=none: ' <<<"$out" && echo ok)" \
  "the hang was not named on a TESTBED-FAULT line"
check "$( ! grep -qx finished <<<"$out" && echo ok)" "the command finished in a frozen VM?"
check "$( [[ $(wc -l <"$scratch/attempts") -eq 1 ]] && echo ok)" "want 1 attempt, saw $(wc -l <"$scratch/attempts")"
if ps -o stat= -g "$first_pid" | grep -qv '^Z'; then
  echo "FAIL: the hung VM's processes are still there:"; ps -o pid,stat,comm -g "$first_pid"; fail=1
fi
kill -CONT -- "-$first_pid" 2>/dev/null

out=$("$harness" exec --session "$session" -- echo after 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
check "$( [[ $rc -eq 0 && $out == *after* ]] && echo ok)" "the next command did not run (exit status $rc)"
check "$( [[ $out == *"starting it again"* ]] && echo ok)" "the next command did not say it started the VM again"

second_pid=$(cat "$session/qemu.pid")
out=$("$harness" exec --session "$session" -- bash -c \
  'echo "<2>BUG: soft lockup - CPU#1 stuck for 22s! [harness-test:1]" >/dev/kmsg; sleep 2; echo done' 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
check "$( [[ $rc -eq 3 ]] && echo ok)" "a kernel fault: exit status $rc, want 3"
check "$( [[ $out == *"the test-bed kernel logged a fault"* && $out == *"BUG: soft lockup - CPU#1 stuck"* ]] && echo ok)" \
  "the fault and its line were not reported"
check "$(grep -q '^kvm-harness: TESTBED-FAULT kind=kernel-fault status=0: .*BUG: soft lockup' <<<"$out" && echo ok)" \
  "the fault was not named on a TESTBED-FAULT line"
check "$( ! ps -o stat= -p "$second_pid" | grep -qv '^Z' && echo ok)" "the faulted VM was not ended"
out=$("$harness" exec --session "$session" -- echo after-fault 2>&1)
rc=$?
check "$( [[ $rc -eq 0 && $out == *after-fault* ]] && echo ok)" "no command ran after the fault (exit status $rc)"
[[ $fail -eq 0 ]] && echo "a hung VM and a faulting kernel each failed their command once, and the next command got a fresh VM"
exit $fail
