#!/usr/bin/env bash
# The device checks of the backbone and schedule issues, as one prepared run on one CUDA GPU.
#
# Here (build machine):  cargo build --release -p ff-cli --features cuda
#                        mkdir -p .gpu && cp -r ../shared/fixtures .gpu/ && cp target/release/flashforward .gpu/
#                        (add `/.gpu/` to .git/info/exclude)
# There (device tool):   run with carry [".gpu"] and command `bash scripts/gpu-check.sh`
# Everything it prints also lands in $OUT (or /tmp/gpu-check) for docs/BENCHMARKS.md.
set -uo pipefail
BIN=${BIN:-.gpu/flashforward}
FIX=${FF_FIXTURES:-.gpu/fixtures}
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/card.txt"

# Parity on CUDA: f32 within 1e-4, bf16 within 2e-2.
for f in wan_dit_tiny wan_dit_tiny_per_frame wan_vae_tiny umt5_tiny; do
    "$BIN" verify-fixture "$FIX/$f" --devices cuda:0 | tee "$OUT/verify-$f-f32.txt"
    "$BIN" verify-fixture "$FIX/$f" --devices cuda:0 --precision bf16 --tolerance 2e-2 | tee "$OUT/verify-$f-bf16.txt"
done

# The 1.3B chunk forward at 480p: 3 × 1560 query tokens over 21 × 1560 keys, random bf16 weights.
"$BIN" bench-dit --configs 1.3b --height 60 --width 104 --context 6 --devices cuda:0 --precision bf16 --iters 5 \
    | tee "$OUT/bench-dit-1.3b.txt"

# Schedules on one GPU at L = 81 (serial and batched executors), traces for the per-forward cost.
"$BIN" bench --config 1.3b --random-weights --latents 81 --height 60 --width 104 --text-tokens 512 \
    --devices cuda:0 --precision bf16 --schedules flashforward,self-forcing,hiar --executors serial,batched \
    --trace "$OUT/traces" | tee "$OUT/bench-1.3b.txt"
