#!/usr/bin/env bash
# The README's command blocks, run as the README says to run them where /dev/kvm is
# missing: each block saved as a script and run with `bash -e` in the KVM test bed, from
# the repository's root, in the README's order (a later block uses what an earlier one
# made: the warm image in /run/warm). Only the build directory is substituted, for a build
# made elsewhere than build/. A block that fails, or leaves a dsec-vmm running, fails the
# test with its output.
#   readme_blocks_test.sh SOURCE_DIR BUILD_DIR HARNESS SESSION
set -euo pipefail
src=$1 build=$2 harness=$3 session=$4
scratch=$build/readme-blocks
rm -rf "$scratch"
mkdir -p "$scratch"

# The sections whose blocks run, in order.
sections=("A sandbox" "Warm images and clones" "A jailed VMM" "The API socket"
  "The sandbox pool")

# block SECTION: the first ```sh block under the heading "## SECTION".
block() {
  awk -v heading="## $1" '
    $0 == heading { in_section = 1; next }
    in_section && /^## / { exit }
    in_section && /^```sh$/ { in_block = 1; next }
    in_block && /^```$/ { exit }
    in_block { print }' "$src/README.md"
}

index=0
for section in "${sections[@]}"; do
  index=$((index + 1))
  script=$scratch/$index.sh
  block "$section" | sed "s|build/vmm/dsec-vmm|$build/vmm/dsec-vmm|g" >"$script"
  [[ -s $script ]] || { echo "FAIL: README.md has no sh block under '## $section'"; exit 1; }
  echo "== $section ($script)"
  status=0
  (cd "$src" && "$harness" exec --session "$session" --timeout 300 -- bash -e "$script") \
    >"$scratch/$index.log" 2>&1 || status=$?
  cat "$scratch/$index.log"
  [[ $status == 0 ]] || { echo "FAIL: the block under '## $section' exited with $status"; exit 1; }
  # The block must end what it started (its VMMs, the pool): a reader who follows the
  # README is left with nothing running.
  left=$("$harness" exec --session "$session" --timeout 60 -- \
    bash -c 'sleep 1; pgrep -a dsec-vmm || true')
  [[ -z $left ]] || { echo "FAIL: '## $section' left running: $left"; exit 1; }
done
echo "PASS"
