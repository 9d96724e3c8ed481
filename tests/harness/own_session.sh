# Sourced by the harness tests that freeze a test-bed VM: `harness session scratch` from
# their arguments, a session of their own started with scratch writable, and on exit its
# VM thawed (a frozen QEMU would not stop) and stopped.
harness=$1 session=$2 scratch=$3
mkdir -p "$scratch"
cleanup() {
  [[ -f "$session/qemu.pid" ]] && pkill -CONT -g "$(cat "$session/qemu.pid")" 2>/dev/null
  "$harness" stop --session "$session" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$harness" start --session "$session" --rw "$scratch" --memory 1024 || exit 1
rm -f "$scratch/attempts"
