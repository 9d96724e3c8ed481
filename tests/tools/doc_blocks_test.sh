#!/usr/bin/env bash
# The command blocks of README.md and docs/ that a newcomer runs to use dsec-vmm, run as
# the pages say to run them where /dev/kvm is missing: saved as a script and run with
# `bash -e` in the KVM test bed, from the repository's root, in the page's order (a later
# block may use what an earlier one of the same page made). A block that fails, or leaves
# a dsec-vmm running once its script ends, fails the test with its output.
#   doc_blocks_test.sh SOURCE_DIR BUILD_DIR HARNESS SESSION PAGE...
#   doc_blocks_test.sh --list SOURCE_DIR BUILD_DIR PAGE...   (print the scripts; run none)
# PAGE is a page relative to SOURCE_DIR, or a directory standing for its *.md pages. The
# scripts and their output are kept in BUILD_DIR/doc-blocks.
#
# A page says which blocks run, with an HTML comment line (not shown when rendered) right
# before a ```sh block:
#   <!-- docs-blocks: run -->        the block runs as a script of its own;
#   <!-- docs-blocks: continue -->   the block runs in the same script as the marked block
#                                    before it: the page continues that shell (its jobs,
#                                    its variables), and the two must end what they start.
# A page's blocks must not need another page's: ctest may run the pages in any order, and
# a test-bed VM that failed is replaced by a fresh one with an empty /run. Only the build
# directory is substituted, for a build made elsewhere than build/.
#
# Left unmarked, and so not run here: blocks that install packages or write outside the
# build directory and /run (tools/install-deps, cmake --install into /opt: the test bed
# mounts the host's / read-only); blocks that build an image from the network
# (images/build-image's kernel, docker and skopeo pulls; a Debian image is only reused:
# tools/test builds it first, as the image e2e tests need it); blocks that take a second
# terminal or an interactive console (Firecracker's getting-started guide, which
# tests/e2e/firecracker_guide_test.cpp runs); benchmarks and soaks (minutes to hours; run
# through tools/kvm-harness on their own); blocks that need hardware KVM or a lent device
# (tools/device-kit); and the test bed's own commands (tools/kvm-harness, which cannot run
# inside itself, and the reproductions of its faults).
set -euo pipefail
list_only=0
if [[ ${1:-} == --list ]]; then
  list_only=1 src=$2 build=$3
  shift 3
else
  src=$1 build=$2 harness=$3 session=$4
  shift 4
fi
scratch=$build/doc-blocks
rm -rf "$scratch"
mkdir -p "$scratch"

pages=()
for arg in "$@"; do
  if [[ -d $src/$arg ]]; then
    for page in "$src/$arg"/*.md; do pages+=("${page#"$src"/}"); done
  else
    pages+=("$arg")
  fi
done

# extract PAGE DIR: writes the page's marked blocks into DIR as 1.sh, 2.sh, ... (a
# `continue` block appended to the script before it) and prints "N LINE" for each script,
# LINE the line of its first block's fence. A marker not right before a ```sh fence, or a
# `continue` with no marked block before it, is an error.
extract() {
  awk -v dir="$2" -v page="$1" '
    function fail(why) { printf "FAIL: %s:%d: %s\n", page, NR, why > "/dev/stderr"; bad = 1; exit 1 }
    marker != "" {
      if ($0 != "```sh") fail("a docs-blocks marker must be right before a ```sh block")
      if (marker == "run") { n++; print n, NR }
      else if (n == 0) fail("docs-blocks: continue with no marked block before it")
      in_block = 1; marker = ""; next
    }
    /^<!-- docs-blocks: / {
      if ($0 == "<!-- docs-blocks: run -->") marker = "run"
      else if ($0 == "<!-- docs-blocks: continue -->") marker = "continue"
      else fail("unknown marker (run or continue): " $0)
      next
    }
    in_block && /^```$/ { in_block = 0; next }
    in_block { print > (dir "/" n ".sh") }
    END { if (!bad && marker != "") fail("a docs-blocks marker at the end of the page") }
  ' "$src/$1"
}

# What a page's blocks leave in the test bed's /run (a tmpfs in its 4 GiB: warm images,
# snapshots) is removed once the page is done, pass or fail, so that the tests after it
# have the memory they had before.
listing=""  # the page's /run listing from before its blocks, in the build directory
clean_run() {
  [[ -n $listing ]] || return 0
  "$harness" exec --session "$session" --timeout 60 -- bash -c \
    "cd /run && ls -A | grep -vxF -f '$listing' | xargs -r -d '\\n' rm -rf --" \
    </dev/null >/dev/null 2>&1 || true
  listing=""
}
trap clean_run EXIT

# run_page PAGE DIR SCRIPTS: runs the page's scripts in order; 0 when each passed, 2 when
# the test bed failed under one (the harness's "kvm-harness: TESTBED-FAULT kind=KIND" line,
# whole: its VM died or hung, its kernel logged a fault, a nested guest triple-faulted as
# the emulated test bed makes them; docs/kvm-test-bed-faults.md), with KIND in $fault,
# 1 for any other failure.
fault=""
run_page() {
  local page=$1 dir=$2 scripts=$3 index line script start status left
  "$harness" exec --session "$session" --timeout 60 -- bash -c "ls -A /run >'$dir/run-before'" \
    </dev/null && listing=$dir/run-before
  while read -r index line; do
    [[ -n $index ]] || continue
    script=$dir/$index.sh
    echo "== $page:$line ($script)"
    start=$SECONDS status=0
    (cd "$src" && "$harness" exec --session "$session" --timeout 300 -- bash -e "$script") \
      </dev/null >"$dir/$index.log" 2>&1 || status=$?
    cat "$dir/$index.log"
    if [[ $status != 0 ]]; then
      echo "FAIL: the block at $page:$line exited with $status"
      fault=$(sed -n 's/^kvm-harness: TESTBED-FAULT kind=\([a-z-]*\).*/\1/p' "$dir/$index.log" | head -n 1) || true
      [[ -n $fault ]] && return 2
      return 1
    fi
    # The block must end what it started (its VMMs, a pool): a reader who follows the page
    # is left with nothing running.
    left=$("$harness" exec --session "$session" --timeout 60 -- \
      bash -c 'sleep 1; pgrep -a dsec-vmm || true' </dev/null)
    [[ -z $left ]] || { echo "FAIL: the block at $page:$line left running: $left"; return 1; }
    echo "== $page:$line passed in $((SECONDS - start)) s"
  done <<<"$scripts"
}

ran=0
for page in "${pages[@]}"; do
  [[ -f $src/$page ]] || { echo "FAIL: no page $page"; exit 1; }
  dir=$scratch/${page//\//_}
  mkdir -p "$dir"
  scripts=$(extract "$page" "$dir") || exit 1
  [[ -n $scripts ]] || continue
  while read -r index line; do
    # The build directory: build/vmm/... and $PWD/build/... name it.
    sed -E -i -e "s#\\\$PWD/build/#$build/#g" \
      -e "s#(^|[[:space:]\"'=(])build/vmm/#\\1$build/vmm/#g" "$dir/$index.sh"
    ran=$((ran + 1))
    if [[ $list_only == 1 ]]; then
      echo "== $page:$line ($dir/$index.sh)"
      cat "$dir/$index.sh"
    fi
  done <<<"$scripts"
  [[ $list_only == 0 ]] || continue
  status=0
  run_page "$page" "$dir" "$scripts" || status=$?
  clean_run
  if [[ $status == 2 ]]; then
    # The page runs again from its first block, in a fresh test-bed VM where the harness
    # ended the old one (an empty /run), else with /run as before the page. The rerun is
    # named here and in $DSEC_TEST_RERUN_LOG, whose lines tools/test prints in its retry
    # table at the end (the output of a test that passed is not in ctest's log), and a
    # second fault fails the test.
    rerun="doc_blocks: TESTBED-RERUN page=$page fault=$fault"
    echo "$rerun"
    [[ -z ${DSEC_TEST_RERUN_LOG:-} ]] || echo "$rerun" >>"$DSEC_TEST_RERUN_LOG"
    echo "doc_blocks: the test bed failed under $page (not the page's fault); running its blocks once more"
    status=0
    run_page "$page" "$dir" "$scripts" || status=$?
    clean_run
  fi
  [[ $status == 0 ]] || exit 1
done
# A marker lost in an edit must not leave a page's test passing with nothing run.
[[ $ran -gt 0 ]] || { echo "FAIL: no marked block in $*"; exit 1; }
[[ $list_only == 1 ]] || echo "PASS: $ran scripts"
