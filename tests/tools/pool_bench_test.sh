#!/usr/bin/env bash
# benchmarks/pool, tiny, inside the test bed (run through kvm-harness exec): it must exit 0
# with its table and the table of the jail's cost (jailed against --no-jail, its last line
# the targets), and leave JSON in which every figure is a number, with acquires of each
# kind and a restore by hand, and a PNG plot.
set -uo pipefail
bench=$1 build=$2
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
json=$build/pool-bench-test.json png=$build/pool-bench-test.png
rm -f "$json" "$png"

expect bench-runs 0 "targets: warm acquire p50 at most 1.15x unjailed" -- timeout 600 "$bench" --seconds 10 --ready 2 \
  --warm 3 --empty 2 --hold 4 --restores 1 --build-dir "$build" --out "$json" --plot "$png"
expect bench-figures 0 "figures: ok" -- /usr/bin/python3 -c '
import json, math, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
want = ["clones_per_s", "cpu_s_per_clone", "clones_per_cpu_s", "hand_cpu_s_per_clone", "used_mib_per_sandbox",
        "pss_mib_per_sandbox", "overcommit", "acquire_warm_ms", "acquire_empty_ms", "hand_restore_ms"]
bad = [k for k in want if not math.isfinite(s[k]["p99"] if isinstance(s.get(k), dict) else s.get(k, math.nan))]
kinds = {a["kind"] for a in r["acquires"]}
missing = {"sustained", "warm", "empty", "hold"} - kinds
print("figures missing:", bad, "acquire kinds missing:", missing, "restores by hand:", len(r["hand_restores"]))
if not bad and not missing and r["hand_restores"] and r["figures"]["hold"]["held"] == 4:
    print("figures: ok")' "$json"
expect bench-plot 0 "png: ok" -- /usr/bin/python3 -c '
import sys
print("png: ok" if open(sys.argv[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n" else "not a PNG")' "$png"
exit $((failures > 0))
