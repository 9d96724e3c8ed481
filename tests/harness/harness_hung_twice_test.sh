#!/usr/bin/env bash
# A command under which the test-bed VM hangs twice (its own session, each VM frozen with
# SIGSTOP, a short hang limit) fails with exit status 2, and the hung VM is ended rather
# than left spinning the host's CPUs; the session's next command starts a fresh VM and runs.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/own_session.sh"
# Each attempt of the command freezes the VM it runs in, from the host.
(
  for n in 1 2; do
    until [[ -f $scratch/attempts && $(wc -l <"$scratch/attempts") -ge $n ]]; do sleep 0.2; done
    pkill -STOP -g "$(cat "$session/qemu.pid")"
  done
) &
out=$(DSEC_TESTBED_HANG_S=10 "$harness" exec --session "$session" -- bash -c \
  'echo attempt >> "$0/attempts"; sleep 3; echo finished' "$scratch" 2>&1)
rc=$?
hung_pid=$(cat "$session/qemu.pid" 2>/dev/null || echo 0)
fail=0
[[ $rc -eq 2 ]] || { echo "FAIL: exit status $rc, want 2 after two hangs"; fail=1; }
[[ $out == *"ending the hung test-bed VM"* ]] || { echo "FAIL: the hung VM was not ended"; fail=1; }
! grep -qx finished <<<"$out" || { echo "FAIL: the command finished in a frozen VM?"; fail=1; }
# (Zombies left for init to reap hold nothing.)
if ps -o stat= -g "$hung_pid" | grep -qv '^Z'; then
  echo "FAIL: the hung VM's processes are still there:"; ps -o pid,stat,comm -g "$hung_pid"; fail=1
fi
echo "$out" | sed 's/^/  | /'
out=$("$harness" exec --session "$session" -- echo after 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *after* ]] || { echo "FAIL: the next command did not run (exit status $rc)"; fail=1; }
[[ $out == *"starting it again"* ]] || { echo "FAIL: the next command did not say it started the VM again"; fail=1; }
echo "$out" | sed 's/^/  | /'
[[ $fail -eq 0 ]] && echo "a VM hung twice was ended, and the next command got a fresh one"
exit $fail
