#!/usr/bin/env bash
# Packs a CUDA build of slicetune into one self-contained archive for a GPU machine that has the CUDA
# libraries (cudart, cuBLAS/cuBLASLt, NCCL) but none of this project's Debian packages (libyaml, fmt,
# OpenBLAS, OpenMPI, ...) and cannot install them: for example a rented cloud GPU with a vendor image.
#
#   scripts/gpu_bundle.sh [BUILD_DIR] [ARCHIVE]      (defaults: build-gpu, .gpubundle/slicetune-bundle.tar.xz)
#
# BUILD_DIR must hold a CUDA build (slicetune, optionally test_cuda), e.g.
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   ninja -C build-gpu slicetune test_cuda
# The archive holds bin/ (the programs), lib/ (every shared library they and OpenMPI's plug-ins load,
# except the C runtime and the CUDA libraries, which the GPU machine's own driver and toolkit supply),
# ompi/ (OpenMPI's plug-ins and help texts) and env.sh. On the GPU machine:
#   mkdir -p /tmp/st && tar xJf slicetune-bundle.tar.xz -C /tmp/st && . /tmp/st/env.sh
#   slicetune run --backend cuda --model tiny ...       (one rank: no mpirun needed)
# env.sh puts the bundle's libraries first, finds the CUDA/NCCL libraries of that machine (the CUDA
# toolkit, /usr/lib, or the nvidia-* Python wheels a PyTorch install brings), and runs OpenMPI as an
# isolated singleton (OMPI_MCA_ess_singleton_isolated=1: one process, no orted, no mpirun).
set -euo pipefail
BUILD=${1:-build-gpu}
ARCHIVE=${2:-.gpubundle/slicetune-bundle.tar.xz}
[ -x "$BUILD/slicetune" ] || { echo "gpu_bundle: $BUILD/slicetune: not found (build it first; see the header of $0)" >&2; exit 2; }
# the CUDA backend is the plug-in libslicetune_cuda.so beside the program (slicetune itself links no
# CUDA library), the executor's MPI half the plug-in libslicetune_mpi.so (slicetune links no MPI
# library); OpenBLAS is loaded with dlopen by the CPU backend and profiler (not in ldd either)
[ -f "$BUILD/libslicetune_cuda.so" ] || { echo "gpu_bundle: $BUILD/libslicetune_cuda.so not found: not a CUDA build (or build the slicetune_cuda target)" >&2; exit 2; }
[ -f "$BUILD/libslicetune_mpi.so" ] || { echo "gpu_bundle: $BUILD/libslicetune_mpi.so not found (build the slicetune target)" >&2; exit 2; }

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/ompi"
cp "$BUILD/slicetune" "$BUILD/libslicetune_cuda.so" "$BUILD/libslicetune_mpi.so" "$STAGE/bin/"
[ -x "$BUILD/test_cuda" ] && cp "$BUILD/test_cuda" "$STAGE/bin/"

# OpenMPI's plug-ins (Debian puts them in openmpi3/ beside its libdir) and help texts
OMPI_LIBDIR=$(dirname "$(ldd "$BUILD/libslicetune_mpi.so" | awk '/libmpi\.so/ {print $3}')")
PLUGINS=""
for d in "$OMPI_LIBDIR/openmpi/lib/openmpi3" /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3; do
  [ -d "$d" ] && { PLUGINS=$d; break; }
done
[ -n "$PLUGINS" ] || { echo "gpu_bundle: OpenMPI plug-in folder not found" >&2; exit 2; }
cp -a "$PLUGINS" "$STAGE/ompi/plugins"
[ -d /usr/share/openmpi ] && cp -a /usr/share/openmpi "$STAGE/ompi/share"

# Every library the programs and the plug-ins load, less the C runtime and the CUDA libraries.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so|libnvidia)'
{
  for f in "$STAGE"/bin/* "$STAGE"/ompi/plugins/*.so; do ldd "$f" 2>/dev/null || true; done
  blas=$(ldconfig -p | awk '/libopenblas\.so\.0 .*x86-64/ {print $NF; exit}')
  if [ -n "$blas" ]; then echo "	libopenblas.so.0 => $blas (dlopen)"; ldd "$blas"; fi
} | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$STAGE/lib/$name"
done

cat >"$STAGE/env.sh" <<'EOF'
# source me: sets up the slicetune bundle in this folder
ST_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
st_cuda_dirs=""
for p in /usr/local/nvidia/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
  [ -d "$p" ] && st_cuda_dirs="$st_cuda_dirs:$p"
done
# NCCL and cuBLAS may come only as Python wheels (nvidia-nccl-cu13, nvidia-cublas, ...)
for lib in libnccl.so.2 libcublasLt.so.13 libcudart.so.13; do
  if ! ( IFS=:; for d in $st_cuda_dirs; do [ -n "$d" ] && [ -e "$d/$lib" ] && exit 0; done; exit 1 ); then
    hit=$(find / -xdev -name "$lib" -not -path '/proc/*' 2>/dev/null | head -1)
    [ -n "$hit" ] && st_cuda_dirs="$st_cuda_dirs:$(dirname "$hit")"
  fi
done
export LD_LIBRARY_PATH="$ST_BUNDLE/lib${st_cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$ST_BUNDLE/bin:$PATH"
export OMPI_MCA_mca_base_component_path="$ST_BUNDLE/ompi/plugins"
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_ess_singleton_isolated=1
export OPAL_PKGDATADIR="$ST_BUNDLE/ompi/share"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset st_cuda_dirs lib hit
EOF

mkdir -p "$(dirname "$ARCHIVE")"
tmp="$ARCHIVE.tmp.$$"
tar -C "$STAGE" -cJf "$tmp" .
mv -f "$tmp" "$ARCHIVE"
echo "gpu_bundle: $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1)): $(ls "$STAGE/bin" | tr '\n' ' ')+ $(ls "$STAGE/lib" | wc -l) libraries, $(ls "$STAGE/ompi/plugins" | wc -l) OpenMPI plug-ins" >&2
