#!/usr/bin/env bash
# Coverage-guided fuzzing of slicetune's readers with libFuzzer (clang 14, ASan + UBSan).
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 60 s; targets: all of fuzz/fuzz_*.cpp)
# CI runs a short pass (./setup.sh test: 10 s per target); the documented longer run is 600 s per
# target (docs/fuzzing.md). Uses the build-asan/ build of scripts/sanitize.sh (configured here if
# missing). Each target starts from a copy of the committed seed corpus (fuzz/corpus/TARGET; new
# inputs go to build-asan/fuzz-corpus/TARGET, never into the repository) and runs with
# -max_total_time; a crash, sanitizer report, leak, timeout (10 s per input) or out-of-memory
# (2 GB) is a finding: its input is saved under build-asan/fuzz-findings/TARGET/ and the script
# exits non-zero. Prints executions, coverage (cov: edges, ft: features) and corpus size per target.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in fuzz/fuzz_*.cpp; do t=$(basename "$f" .cpp); targets+=("${t#fuzz_}"); done
fi
[ -f build-asan/build.ninja ] || scripts/sanitize.sh none
fuzzers=()
for t in "${targets[@]}"; do fuzzers+=("fuzz_$t"); done
cmake --build build-asan -j "$(nproc)" --target "${fuzzers[@]}" >&2

export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
printf '%-10s %8s %10s %8s %8s %8s  %s\n' target seconds execs exec/s cov ft corpus >&2
for t in "${targets[@]}"; do
  corpus=build-asan/fuzz-corpus/$t findings=build-asan/fuzz-findings/$t
  mkdir -p "$corpus" "$findings"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  log=build-asan/fuzz-$t.log
  # flags: the commands' one-line errors go to stderr; -close_fd_mask=2 silences the target's stderr
  # while libFuzzer and the sanitizers report on a copy of it
  mask=0
  [ "$t" = flags ] && mask=2
  if ! nice build-asan/fuzz/fuzz_"$t" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -close_fd_mask=$mask -print_final_stats=1 -artifact_prefix="$findings/" -dict=fuzz/slicetune.dict >"$log" 2>&1; then
    status=1
    echo "fuzz: $t: FINDING (see $log and $findings/)" >&2
    grep -E "ERROR|runtime error|SUMMARY" "$log" | head -5 >&2 || true
  fi
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(echo "$last" | grep -oE 'cov: [0-9]+' | grep -oE '[0-9]+' || echo ?)
  ft=$(echo "$last" | grep -oE 'ft: [0-9]+' | grep -oE '[0-9]+' || echo ?)
  printf '%-10s %8s %10s %8s %8s %8s  %s\n' "$t" "$seconds" "$execs" "$((execs / (seconds > 0 ? seconds : 1)))" "$cov" "$ft" \
    "$(ls "$corpus" | wc -l)" >&2
done
exit $status
