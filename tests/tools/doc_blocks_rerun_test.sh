#!/usr/bin/env bash
# doc_blocks_test.sh's page rerun, with a stand-in harness on a made-up page: a block under
# which the harness named a test-bed fault (its whole TESTBED-FAULT line) reruns the page
# once, prints its TESTBED-RERUN line and appends it to $DSEC_TEST_RERUN_LOG, whose rows
# tools/test-retries puts in the retry table; a block that failed on its own, or printed
# such a line inside its own, is not rerun; a second fault fails the test.
#   doc_blocks_rerun_test.sh TESTS_TOOLS_DIR TOOLS_DIR
set -uo pipefail
here=$1 tools=$2
source "$here/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/build" "$tmp/state"
printf '# A page\n<!-- docs-blocks: run -->\n```sh\necho block-ran\n```\n' >"$tmp/src/page.md"
# The stand-in harness: `exec ... -- bash -e SCRIPT` is a block's try, numbered in
# $STATE/tries; try N fails as $STATE/N says (fault, own, quoted), or runs the script. Any
# other command (the page's /run listing and clean-up, the pgrep) does nothing here.
cat >"$tmp/harness" <<'EOF'
#!/usr/bin/env bash
while [[ $1 != -- ]]; do shift; done; shift
[[ $1 == bash && $2 == -e ]] || exit 0
n=$(( $(cat "$STATE/tries" 2>/dev/null || echo 0) + 1 )); echo "$n" >"$STATE/tries"
case $(cat "$STATE/$n" 2>/dev/null) in
  fault) echo partial; printf '\nkvm-harness: TESTBED-FAULT kind=vm-died status=none: died under %s\n' "$3" >&2; exit 2 ;;
  own) echo "block failed on its own"; exit 1 ;;
  quoted) echo "it said: kvm-harness: TESTBED-FAULT kind=vm-died status=none"; exit 2 ;;
esac
exec bash -e "$3"
EOF
chmod +x "$tmp/harness"
export STATE=$tmp/state DSEC_TEST_RERUN_LOG=$tmp/reruns.log
page() { bash "$here/doc_blocks_test.sh" "$tmp/src" "$tmp/build" "$tmp/harness" "$tmp/session" page.md; }
tries() { cat "$STATE/tries"; }
scenario() { rm -f "$STATE"/*; : >"$DSEC_TEST_RERUN_LOG"; local n=1 how; for how; do echo "$how" >"$STATE/$n"; n=$((n + 1)); done; }

scenario fault
expect fault-reruns 0 "doc_blocks: TESTBED-RERUN page=page.md fault=vm-died" -- page
expect fault-two-tries 0 "2" -- tries
expect fault-recorded 0 "" -- grep -qx "doc_blocks: TESTBED-RERUN page=page.md fault=vm-died" "$DSEC_TEST_RERUN_LOG"
: >"$tmp/ctest.log"
expect fault-in-table 0 "page.md" -- "$tools/test-retries" "$tmp/ctest.log" --reruns "$DSEC_TEST_RERUN_LOG"
expect fault-counted 0 "and 1 docs page reruns" -- "$tools/test-retries" "$tmp/ctest.log" --reruns "$DSEC_TEST_RERUN_LOG"

scenario own
expect own-fails 1 "block failed on its own" -- page
expect own-one-try 0 "1" -- tries
expect own-not-recorded 0 "" -- test ! -s "$DSEC_TEST_RERUN_LOG"

scenario quoted
expect quoted-fails 1 "FAIL: the block at page.md:3 exited with 2" -- page
expect quoted-one-try 0 "1" -- tries

scenario fault fault
expect second-fault-fails 1 "doc_blocks: TESTBED-RERUN page=page.md fault=vm-died" -- page
expect second-fault-two-tries 0 "2" -- tries
exit $((failures > 0))
