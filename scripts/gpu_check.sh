#!/usr/bin/env bash
# One-shot check of the CUDA backend on a machine with one NVIDIA GPU (H100/H200 class), run from
# the repository root. Builds with CUDA (sm_90 only, to keep the build short), then:
#   1. tiny model, fp32, 20 steps: --backend cuda vs --backend cpu (same plan, same seed) -> loss per step;
#   2. tiny-llama (RMSNorm, SwiGLU, RoPE, GQA), fp32: cuda vs cpu;
#   3. tiny, bf16, domino 2 row slices x 2 column chunks vs none, on the GPU;
#   4. a 4-layer gpt3-13b-shaped stack (h 5120, 40 heads, seq 2048, vocab 51200), bf16, tp 1,
#      micro-batch 4: domino 2 row slices vs none -> step times and losses;
#   5. a CUDA profile of this GPU (`profile --backend cuda --quick`: the executor's own cuBLASLt GEMM
#      path, attention, element-wise and AdamW kernels, bf16, with that model's exact shapes; one GPU
#      gives no collective figures) -> profile-cuda.yaml;
#   6. `validate` of the step-4 runs against that profile, task class by task class.
# Writes everything under $OUT (default ./gpu_check_out): run JSONs, traces, the profile, validations,
# results.md. With ST=path/to/slicetune (and LAUNCH= for an MPI singleton) it uses prebuilt programs
# (scripts/gpu_bundle.sh) instead of building. Budget: about 10 minutes on a 16-core H200 host (build ~3 min, runs ~3 min, profile ~2).
set -euo pipefail
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
JOBS=${JOBS:-$(nproc)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI and device machines run as root
log() { echo "[gpu_check $(date +%H:%M:%S)] $*" | tee -a "$OUT/log.txt" >&2; }

log "host: $(nproc) cores; GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
t0=$(date +%s)
if [ -n "${ST:-}" ]; then
  # prebuilt programs (scripts/gpu_bundle.sh, for a GPU machine without this project's packages)
  [ -x "$ST" ] || { log "ST=$ST is not an executable"; exit 1; }
  TEST_CUDA=${TEST_CUDA:-$(dirname "$ST")/test_cuda}
  log "prebuilt: $ST ($("$ST" --version 2>&1 | head -1))"
else
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/cmake.txt" 2>&1 ||
    { log "cmake failed"; tail -30 "$OUT/cmake.txt"; exit 1; }
  grep -q "cuda(executor+profiler)=ON" "$OUT/cmake.txt" || { log "CMake did not enable CUDA"; grep "slicetune parts" "$OUT/cmake.txt"; exit 1; }
  ninja -C build-gpu -j"$JOBS" slicetune test_cuda >"$OUT/build.txt" 2>&1 || { log "build failed"; tail -40 "$OUT/build.txt"; exit 1; }
  log "built in $(( $(date +%s) - t0 )) s"
  ST=./build-gpu/slicetune
  TEST_CUDA=./build-gpu/test_cuda
fi
# LAUNCH: how one rank is started ("mpirun -np 1" by default; empty for an isolated MPI singleton)
LAUNCH=${LAUNCH-mpirun -np 1}
if [ -x "$TEST_CUDA" ]; then
  # test_cuda starts one rank the way this script does (SLICETUNE_TEST_LAUNCH, tests/cuda/test_device.cpp)
  SLICETUNE_TEST_LAUNCH="$LAUNCH" timeout 180 "$TEST_CUDA" >"$OUT/test_cuda.txt" 2>&1 && log "test_cuda: $(tail -1 "$OUT/test_cuda.txt")" ||
    log "test_cuda FAILED (see test_cuda.txt): $(tail -3 "$OUT/test_cuda.txt" | tr '\n' ' ')"
fi
run() {  # run NAME ARGS... -> $OUT/NAME.json (+ trace), stderr to NAME.err
  local name=$1; shift
  local t=$(date +%s)
  if timeout 240 $LAUNCH "$ST" run --quiet --json --out "$OUT/$name.json" --trace "$OUT/$name.trace.json" "$@" \
       >"$OUT/$name.stdout" 2>"$OUT/$name.err"; then
    log "$name: ok in $(( $(date +%s) - t )) s"
  else
    log "$name: FAILED (exit $?): $(tail -3 "$OUT/$name.err" | tr '\n' ' ')"
  fi
}

TINY="--micro-batch 4 --global-batch 8 --steps 20 --warmup 2 --seed 7"
run tiny_cpu_fp32       --backend cpu  --model tiny --dtype fp32 $TINY
run tiny_cuda_fp32      --backend cuda --model tiny --cluster dgx-h200 --dtype fp32 $TINY
run llama_cpu_fp32      --backend cpu  --model tiny-llama --dtype fp32 $TINY
run llama_cuda_fp32     --backend cuda --model tiny-llama --cluster dgx-h200 --dtype fp32 $TINY
run tiny_cuda_bf16_none --backend cuda --model tiny --cluster dgx-h200 --dtype bf16 $TINY
run tiny_cuda_bf16_domino --backend cuda --model tiny --cluster dgx-h200 --dtype bf16 --strategy domino --row-slices 2 --col-slices 2 $TINY

# gpt3-13b shapes, 4 layers (the file is the embedded gpt3-13b with layers: 4)
sed 's/^layers: .*/layers: 4/; s/^name: .*/name: gpt3-13b-4l/' configs/models/gpt3-13b.yaml >"$OUT/gpt3-13b-4l.yaml"
# lr 1e-4: GPT-3 13B's own (Brown et al. 2020, table 2.1); the executor's default 3e-3 diverges at h 5120
BIG="--model $OUT/gpt3-13b-4l.yaml --cluster dgx-h200 --dtype bf16 --micro-batch 4 --global-batch 4 --steps 8 --warmup 3 --seed 7 --lr 1e-4"
run g13b_none   --backend cuda $BIG --strategy none
run g13b_domino --backend cuda $BIG --strategy domino --row-slices 2

# CUDA profile of this GPU with the step-4 model's shapes, then the step-4 runs validated against it
t=$(date +%s)
if timeout 300 $LAUNCH "$ST" profile --backend cuda --quick --model "$OUT/gpt3-13b-4l.yaml" --tp 1 --micro-batch 4 \
     --out "$OUT/profile-cuda.yaml" >"$OUT/profile.stdout" 2>"$OUT/profile.err"; then
  log "profile: ok in $(( $(date +%s) - t )) s: $(tail -1 "$OUT/profile.err")"
  for n in g13b_none g13b_domino; do
    [ -f "$OUT/$n.json" ] || continue
    strat=none; extra=""
    [ "$n" = g13b_domino ] && { strat=domino; extra="--row-slices 2"; }
    if "$ST" validate --measured "$OUT/$n.json" --profile "$OUT/profile-cuda.yaml" --model "$OUT/gpt3-13b-4l.yaml" \
         --tp 1 --micro-batch 4 --global-batch 4 --dtype bf16 --strategy $strat $extra \
         --trace "$OUT/validate_$n.trace.json" >"$OUT/validate_$n.txt" 2>"$OUT/validate_$n.err"; then
      log "validate $n: $(grep '^step' "$OUT/validate_$n.txt")"
    else
      log "validate $n: FAILED: $(tail -2 "$OUT/validate_$n.err" | tr '\n' ' ')"
    fi
  done
else
  log "profile: FAILED (exit $?): $(tail -3 "$OUT/profile.err" | tr '\n' ' ')"
fi

# summary
python3 - "$OUT" <<'EOF' | tee "$OUT/results.md"
import json, sys, os
out = sys.argv[1]
def load(n):
    p = os.path.join(out, n + ".json")
    try:
        return json.load(open(p))
    except Exception as e:
        return None
def rel(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
print("# CUDA backend check\n")
print("| run | step time median (ms) | tokens/s | loss first -> last |")
print("|---|---|---|---|")
names = ["tiny_cpu_fp32", "tiny_cuda_fp32", "llama_cpu_fp32", "llama_cuda_fp32", "tiny_cuda_bf16_none",
         "tiny_cuda_bf16_domino", "g13b_none", "g13b_domino"]
for n in names:
    j = load(n)
    if j is None:
        print(f"| {n} | FAILED | | |"); continue
    print(f"| {n} | {j['step_time_ms']:.3f} | {j['tokens_per_s']:.0f} | {j['loss'][0]:.4f} -> {j['loss'][-1]:.4f} |")
print()
for a, b, what, tol in [("tiny_cuda_fp32", "tiny_cpu_fp32", "tiny fp32: cuda vs cpu", 1e-3),
                        ("llama_cuda_fp32", "llama_cpu_fp32", "tiny-llama fp32: cuda vs cpu", 1e-3),
                        ("tiny_cuda_bf16_domino", "tiny_cuda_bf16_none", "tiny bf16: domino 2x2 vs none", 2e-2),
                        ("g13b_domino", "g13b_none", "gpt3-13b 4 layers bf16: domino 2 rows vs none", 2e-2)]:
    ja, jb = load(a), load(b)
    if ja is None or jb is None:
        print(f"- {what}: not compared (a run failed)"); continue
    r = rel(ja["loss"], jb["loss"])
    falls = ja["loss"][-1] < ja["loss"][0]
    print(f"- {what}: max relative loss difference over {len(ja['loss'])} steps = {r:.2e} "
          f"({'MATCH' if r <= tol else 'MISMATCH'} at tolerance {tol:g}); loss falls: {falls}")
EOF
for n in g13b_none g13b_domino; do
  [ -f "$OUT/validate_$n.txt" ] && { printf '\n## validate %s against profile-cuda.yaml\n\n```\n' "$n"; cat "$OUT/validate_$n.txt"; printf '```\n'; } | tee -a "$OUT/results.md"
done
log "done in $(( $(date +%s) - t0 )) s; results in $OUT/results.md"
