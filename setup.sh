#!/usr/bin/env bash
# slicetune set-up: installs what is missing (Debian 12 packages), builds, then runs.
#   ./setup.sh run     build and run the main job on the embedded default
#   ./setup.sh test    build and run the whole test suite, then the sanitizer builds (ASan + UBSan:
#                      the suite and the fuzz seed corpus; TSan: the tuner) and a short fuzzing pass
#                      (scripts/sanitize.sh, scripts/fuzz.sh; what CI runs: about an hour on 2 cores, of CI's
#                      90-minute limit for one run: the measured parts in docs/fuzzing.md, "CI cost")
#   ./setup.sh unit    build and run the test suite only (Release; a few minutes)
#   ./setup.sh build   build only
# Idempotent: packages already present are not reinstalled; the build is incremental.
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-run}
shift || true

packages=(build-essential cmake ninja-build pkg-config libboost-graph-dev libcli11-dev libyaml-dev libfmt-dev
          doctest-dev nlohmann-json3-dev libopenblas-dev openmpi-bin libopenmpi-dev gnuplot-nox
          clang-14 libclang-rt-14-dev  # clang + compiler-rt: libFuzzer and the sanitizer builds (scripts/)
          libsqlite3-dev  # validate reads Nsight Systems exports (nsys export --type sqlite)
          lld)  # links the program with the code its commands run placed together (cmake/link-order.txt)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${SLICETUNE_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
jobs=$(nproc)
cmake --build "$build" -j "$jobs" >&2

case "$mode" in
  run)   exec "$build/slicetune" tune "$@" ;;
  unit)  cd "$build" && exec ctest --output-on-failure -j "$jobs" "$@" ;;
  test)
    t0=$SECONDS
    (cd "$build" && ctest --output-on-failure -j "$jobs" "$@")
    echo "setup: release tests done at $((SECONDS - t0)) s" >&2
    scripts/sanitize.sh all
    echo "setup: sanitizer builds and tests done at $((SECONDS - t0)) s" >&2
    scripts/fuzz.sh "${SLICETUNE_FUZZ_SECONDS:-10}"  # 12 targets x 10 s
    echo "setup: fuzzing done at $((SECONDS - t0)) s" >&2 ;;
  build) ;;
  *) echo "usage: ./setup.sh run|test|unit|build" >&2; exit 2 ;;
esac
