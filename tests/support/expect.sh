# Sourced by the shell tests: `expect NAME WANT_RC WANT_TEXT -- COMMAND...` runs COMMAND,
# checks its exit status and that WANT_TEXT is in its output (stdout and stderr), prints
# "ok" or "FAIL" with the output, and counts failures in $failures.
failures=0

expect() {
  local name=$1 want_rc=$2 want_text=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne $want_rc || $out != *"$want_text"* ]]; then
    echo "FAIL $name: rc=$rc (want $want_rc), wanted \"$want_text\" in:"; echo "$out" | sed 's/^/  | /'
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
