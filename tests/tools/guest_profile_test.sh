#!/usr/bin/env bash
# Unit tests of tools/guest-profile on a made-up profile and System.map: samples land on
# the right functions, low addresses are counted together, the timeline buckets by time, and
# bad input fails with exit status 2 and a message. No KVM.
set -uo pipefail
tool=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/System.map" <<'MAP'
ffffffff81000000 T _text
ffffffff81001000 T start_kernel
ffffffff81002000 t free_reserved_area
ffffffff81003000 D some_data
ffffffff81004000 t wrmsrl
ffffffff81005000 t wrmsrl
MAP
# 3 samples in free_reserved_area, 2 in start_kernel (one on each vCPU), 1 at a low address;
# the data symbol must not capture the sample past it.
cat >"$tmp/profile" <<'PROFILE'
# dsec-vmm guest profile: 6 samples, one every 1000 us per vCPU
# vcpu microseconds_since_start rip
0 1000 ffffffff81001010
1 1500 ffffffff81001ff0
0 150000 ffffffff81002000
0 151000 ffffffff81002abc
0 152000 ffffffff81003100
0 250000 401000
PROFILE
# Two static functions of one name stay apart, each named with its address.
cat >"$tmp/same-name" <<'PROFILE'
0 1000 ffffffff81004010
0 2000 ffffffff81005010
0 3000 ffffffff81005020
PROFILE

map=(--system-map "$tmp/System.map")
expect totals 0 "6 samples from 2 vCPU(s) over 249 ms" -- "$tool" "$tmp/profile" "${map[@]}"
expect top-function 0 " 50.0%       3  free_reserved_area" -- "$tool" "$tmp/profile" "${map[@]}"
expect second-function 0 " 33.3%       2  start_kernel" -- "$tool" "$tmp/profile" "${map[@]}"
expect user-samples 0 " 16.7%       1  [low address: user space, or a vCPU before paging]" -- "$tool" "$tmp/profile" "${map[@]}"
expect timeline 0 "     100 ms      3 samples  free_reserved_area 100%" -- \
  "$tool" "$tmp/profile" "${map[@]}"
expect same-name-apart 0 " 66.7%       2  wrmsrl@ffffffff81005000" -- \
  "$tool" "$tmp/same-name" "${map[@]}"
expect same-name-other 0 " 33.3%       1  wrmsrl@ffffffff81004000" -- \
  "$tool" "$tmp/same-name" "${map[@]}"
expect top-limit 0 "top 1 functions" -- "$tool" "$tmp/profile" "${map[@]}" --top 1

printf '0 1000 not-hex\n' >"$tmp/bad"
expect bad-line 2 "bad:1: not a profile line" -- "$tool" "$tmp/bad" "${map[@]}"
expect missing-profile 2 "cannot read the profile" -- "$tool" "$tmp/none" "${map[@]}"
expect missing-vmlinux 2 "no vmlinux at $tmp/none" -- "$tool" "$tmp/profile" --vmlinux "$tmp/none"
: >"$tmp/empty"
expect no-samples 0 "no samples" -- "$tool" "$tmp/empty" "${map[@]}"

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
