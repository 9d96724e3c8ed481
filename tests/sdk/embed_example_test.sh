#!/usr/bin/env bash
# The embedding library as an orchestrator's author gets it: `cmake --install` of this build
# into a fresh prefix, examples/embed built against that prefix with nothing but
# find_package(dsec-vmm), then run in the KVM test bed on the default image: boot, exec, cp
# both ways, snapshot, restore. Also checks that libdsec-vmm.so exports only dsec::sdk.
#   embed_example_test.sh SOURCE_DIR BUILD_DIR HARNESS SESSION
set -euo pipefail
src=$1 build=$2 harness=$3 session=$4
scratch=$build/sdk-example
rm -rf "$scratch"
mkdir -p "$scratch"
prefix=$scratch/prefix

cmake --install "$build" --prefix "$prefix" >"$scratch/install.log"
lib=$(ls "$prefix"/lib*/libdsec-vmm.so)
# Every dynamic symbol the library defines is the public API's.
leaked=$(nm -D --defined-only -C "$lib" | awk '{ $1 = ""; $2 = ""; print }' |
  grep -v -e '^ *dsec::sdk::' -e '^ *DSEC_' || true)
if [[ -n $leaked ]]; then
  echo "FAIL: $lib exports symbols outside dsec::sdk:"; echo "$leaked" | head -20; exit 1
fi

cmake -S "$src/examples/embed" -B "$scratch/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >"$scratch/configure.log"
cmake --build "$scratch/build" >"$scratch/build.log" ||
  { cat "$scratch/build.log"; exit 1; }
example=$scratch/build/embed-example

cache=${DSEC_CACHE:-$HOME/.cache/dsec-vmm}
image=${DSEC_IMAGE_DIR:-$cache/default}
[[ -r $image/kernel && -r $image/initrd ]] ||
  { echo "FAIL: no default image in $image (images/build-image builds it)"; exit 1; }

# In the test bed: the runtime directories and the work directory on its own tmpfs (/run;
# sockets cannot be bound on the 9p export), and nothing in PATH: the library must find
# the dsec-vmm installed beside it.
status=0
"$harness" exec --session "$session" --timeout 480 -- bash -c '
  work=$(mktemp -d /run/embed-example.XXXXXX)
  runtime=$(mktemp -d /run/embed-runtime.XXXXXX)
  trap "rm -rf $work $runtime" EXIT
  env PATH=/nonexistent XDG_RUNTIME_DIR=$runtime "$1" "$2" "$3" "$work"
  rc=$?
  left=$(ls -A "$runtime")
  [[ -z $left ]] || { echo "runtime directories left behind: $left"; rc=1; }
  exit $rc' _ "$example" "$image/kernel" "$image/initrd" >"$scratch/run.log" 2>&1 || status=$?
cat "$scratch/run.log"
[[ $status == 0 ]] || { echo "FAIL: embed-example exited with status $status"; exit 1; }
for expected in "booted a sandbox" "Linux" "HELLO FROM THE HOST" "with a 1 MiB limit: the command wrote more" \
  "paused and resumed" "snapshot written" \
  "first sandbox stopped (VMM exit status 0)" "restored a clone" "done: the clone has"; do
  grep -qF "$expected" "$scratch/run.log" || { echo "FAIL: no '$expected' in its output"; exit 1; }
done
echo "PASS"
