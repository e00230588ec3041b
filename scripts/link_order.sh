#!/usr/bin/env bash
# Regenerates cmake/link-order.txt: the functions of the slicetune program that the commands
# bench_startup times actually run, one mangled name a line, for the linker (lld
# --symbol-ordering-file, CMakeLists.txt) to place together at the start of the program's code.
#   scripts/link_order.sh [PROGRAM]   (default build/slicetune; run it from a Release build)
#
# Why: every page of code a process touches first costs a page fault, and on this kind of VM a fault
# costs 12-30 us (docs/benchmarks.md, "The code a run uses, placed together"). The kernel maps a
# file's pages 64 KiB at a time around a fault (fault-around), so what counts is how many 64 KiB
# windows of the program's 4 MB of code a run touches: scattered in link order, `tune` touched 58 of
# 63 and `simulate` 45; placed together, 20-23.
#
# How: each command runs once under valgrind's callgrind (exact: every function executed, however
# briefly); the names are those of the functions callgrind attributes to PROGRAM. Order: the
# functions more of the commands run first (start-up and what every command shares), then by name,
# so the file is the same for the same program. A function missing from the file (new or renamed
# since it was made) is only placed after the listed ones: regenerate after large changes.
# Needs valgrind (Debian: valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
program=$(realpath "${1:-build/slicetune}")
[ -x "$program" ] || { echo "link_order.sh: '$program' is not an executable program" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "link_order.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
out=cmake/link-order.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the commands bench/bench_startup.cpp times
commands=("--help" "list" "simulate" "simulate --json" "collective" "tune" "tune --threads 1")
n=0
for c in "${commands[@]}"; do
  n=$((n + 1))
  echo "link_order.sh: callgrind: slicetune $c" >&2
  # shellcheck disable=SC2086  # the command's words are meant to split
  valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.$n" "$program" $c >/dev/null 2>"$work/log.$n" ||
    { echo "link_order.sh: 'slicetune $c' failed under callgrind (log: $work/log.$n)" >&2; cat "$work/log.$n" >&2; exit 1; }
done

# callgrind's compressed names: "ob=(id) name" / "cob=(id) name" define an object's id, "fn=(id)
# name" / "cfn=(id) name" a function's; a later "ob=(id)" or "fn=(id)" refers back. A function is
# the program's where its fn= line follows an ob= line naming the program. "'2" and the like mark
# recursion depths, not other symbols; "(below main)" and bare addresses are no symbols.
for f in "$work"/cg.*; do
  awk -v prog="$program" '
    function split_ref(s, parts,   i) {  # "(12) name" -> parts[1]=12, parts[2]=name (may be empty)
      i = index(s, ")")
      parts[1] = substr(s, 2, i - 2)
      parts[2] = substr(s, i + 2)
    }
    /^c?ob=\(/ { split_ref(substr($0, index($0, "=") + 1), p); if (p[2] != "") ob[p[1]] = p[2]
                 if ($0 ~ /^ob=/) cur = ob[p[1]]; next }
    /^c?fn=\(/ { split_ref(substr($0, index($0, "=") + 1), p); if (p[2] != "") fn[p[1]] = p[2]
                 if ($0 ~ /^fn=/ && cur == prog) { name = fn[p[1]]; sub(/'\''[0-9]+$/, "", name)
                                                  if (name ~ /^[A-Za-z_][A-Za-z0-9_.$]*$/) print name } }
  ' "$f" | sort -u
done | sort | uniq -c | sort -k1,1nr -k2,2 | awk '{print $2}' >"$work/order"

count=$(wc -l <"$work/order")
[ "$count" -gt 100 ] || { echo "link_order.sh: only $count functions found in $program: is it a build with symbols?" >&2; exit 1; }
{
  echo "# The functions the commands bench_startup times run, most shared first: written by"
  echo "# scripts/link_order.sh from $(basename "$program") at commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); read by lld"
  echo "# (--symbol-ordering-file, CMakeLists.txt). Regenerate after large changes; never edit by hand."
  cat "$work/order"
} >"$out.tmp"
mv -f "$out.tmp" "$out"
echo "link_order.sh: $count functions -> $out" >&2
