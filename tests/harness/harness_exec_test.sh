#!/usr/bin/env bash
# Runs inside a started test-bed session: the command's output and exit status come back
# as they were, and files written in a writable export reach the host.
set -uo pipefail
harness=$1 session=$2 scratch=$3
mkdir -p "$scratch"; rm -f "$scratch/written-inside"
out=$("$harness" exec --session "$session" -- bash -c \
  'test -c /dev/kvm && echo "kvm-ok"; echo to-stderr >&2; echo inside > "$0/written-inside"; exit 7' \
  "$scratch" 2>&1)
rc=$?
fail=0
[[ $rc -eq 7 ]] || { echo "FAIL: exit status $rc, want 7"; fail=1; }
[[ $out == *kvm-ok* ]] || { echo "FAIL: /dev/kvm missing inside the test bed"; fail=1; }
[[ $out == *to-stderr* ]] || { echo "FAIL: stderr did not come back"; fail=1; }
[[ $(cat "$scratch/written-inside" 2>/dev/null) == inside ]] || { echo "FAIL: the file written inside did not reach the host"; fail=1; }
echo "$out" | sed 's/^/  | /'
[[ $fail -eq 0 ]] && echo "exit status, output and writes came back from the test bed"
exit $fail
