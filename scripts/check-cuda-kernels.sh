#!/usr/bin/env bash
# Every CUDA kernel of the project compiled to GPU code, with no GPU and no driver (issue 48):
# `flashforward kernels emit --target cuda` writes the CUDA C++ that CubeCL's CUDA compiler makes
# of each kernel, and NVRTC from NVIDIA's wheels compiles it for sm_80 and sm_90 with ptxas's
# verbose report. Prints registers, spill bytes, stack frame and shared memory per kernel; fails
# on a compile error, on tensor-core kernels without `mma`, or on a spill in an attention kernel
# at head dim 128 (scripts/nvrtc_check.py). `.ci/run` runs it.
#
# Needs python3 with venv and the package index (the wheels are cached in the venv under
# target/, made once). FF_BIN: a prebuilt `flashforward` with the `cuda` feature (else built here).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
venv="$target/nvrtc-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import nvidia" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        nvidia-cuda-nvrtc==13.5.37 nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37 nvidia-cuda-cccl==13.3.5.0.6
fi
if [ -z "${FF_BIN:-}" ]; then
    cargo build -p ff-cli --features cuda
    FF_BIN="$target/debug/flashforward"
fi
out="$target/cuda-kernels"
rm -rf "$out"
"$FF_BIN" kernels emit --target cuda --out "$out"
"$venv/bin/python" scripts/nvrtc_check.py "$out" 80 90
