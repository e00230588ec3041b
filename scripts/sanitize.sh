#!/usr/bin/env bash
# Sanitizer builds and runs (CI calls this through ./setup.sh test; run it from the repository root).
#   scripts/sanitize.sh [asan|tsan|all]   (default all)
#
# asan: build-asan/, clang 14, -O1, AddressSanitizer + UndefinedBehaviorSanitizer (with
#       -fsanitize=float-cast-overflow, every report fatal) + libFuzzer coverage: the whole test suite
#       (ctest: the executor's mpirun tests included) and the fuzz seed corpus (the fuzz_corpus_*
#       tests), and the libFuzzer targets that scripts/fuzz.sh runs. CPU only (nothing CUDA can run here).
# tsan: build-tsan/, clang 14, -O1, ThreadSanitizer over the tuner (its parallel search and memory
#       model cache): test_tuner.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}  # "none": configure build-asan only
jobs=$(nproc)
CXX=${CXX_SANITIZE:-clang++-14}
CC=${CC_SANITIZE:-clang-14}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# Open MPI keeps allocations until exit and leaves some of its own: LeakSanitizer suppressions for them
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

if [[ $what == asan || $what == all || $what == none ]]; then
  flags="-O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fsanitize=fuzzer-no-link"
  if [ ! -f build-asan/build.ninja ]; then
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_C_COMPILER="$CC" \
      -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DSLICETUNE_DISABLE_CUDA=ON \
      -DSLICETUNE_FUZZ=ON -DSLICETUNE_BENCH=OFF -DSLICETUNE_STATIC_RUNTIME=OFF "${launcher[@]}" >&2
  fi
fi
if [[ $what == none ]]; then exit 0; fi
if [[ $what == asan || $what == all ]]; then
  t0=$SECONDS
  cmake --build build-asan -j "$jobs" >&2
  echo "sanitize: asan+ubsan build $((SECONDS - t0)) s" >&2
  t0=$SECONDS
  # SLICETUNE_ASAN_CTEST_ARGS: extra ctest arguments, e.g. "-E fidelity" to leave out a suite when a CI
  # machine is too slow for the whole one (docs/fuzzing.md, "CI cost"); default: the whole suite
  # SLICETUNE_GOLDEN_SKIP: golden cases left out under ASan; default the two largest searches (the
  # exhaustive default tune, 277,223 plans, and 175B on 16 DGX-H200, 2.3 M plans: about 60 s of CPU
  # in Release, 15-20x that under ASan); they run in the Release suite. Set it empty for all.
  export SLICETUNE_GOLDEN_SKIP=${SLICETUNE_GOLDEN_SKIP-tune-default-exhaustive,tune-175b-h200-16}
  # shellcheck disable=SC2086
  (cd build-asan && ctest --output-on-failure -j "$jobs" ${SLICETUNE_ASAN_CTEST_ARGS:-})
  echo "sanitize: asan+ubsan tests $((SECONDS - t0)) s" >&2
fi

if [[ $what == tsan || $what == all ]]; then
  if [ ! -f build-tsan/build.ninja ]; then
    cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_C_COMPILER="$CC" \
      -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only -fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DSLICETUNE_DISABLE_CUDA=ON \
      -DSLICETUNE_BENCH=OFF -DSLICETUNE_STATIC_RUNTIME=OFF \
      "${launcher[@]}" >&2
  fi
  t0=$SECONDS
  cmake --build build-tsan -j "$jobs" --target test_tuner >&2
  echo "sanitize: tsan build $((SECONDS - t0)) s" >&2
  t0=$SECONDS
  (cd build-tsan && ./test_tuner)
  echo "sanitize: tsan test_tuner $((SECONDS - t0)) s" >&2
fi
