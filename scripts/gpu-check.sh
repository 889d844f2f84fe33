#!/usr/bin/env bash
# The device checks of the backbone, schedule and block-sparse attention (issue 7) issues and of
# issue 48 (full tables on Burn's attention, fusion on), as one prepared run on one CUDA GPU
# (about 8 minutes on an H100/H200). The kernels' compile check needs no GPU:
# scripts/check-cuda-kernels.sh.
#
# Here (build machine):  cargo build --release -p ff-cli --features cuda
#                        mkdir -p .gpu && cp target/release/flashforward .gpu/
#                        (the fixtures are the repository's tests/fixtures, which travel with the tree)
#                        (add `/.gpu/` to .git/info/exclude)
# There (device tool):   run with carry [".gpu"] and command `bash scripts/gpu-check.sh`
# Everything it prints also lands in $OUT (or /tmp/gpu-check) for docs/BENCHMARKS.md.
set -uo pipefail
BIN=${BIN:-.gpu/flashforward}
FIX=${FF_FIXTURES:-tests/fixtures}
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/card.txt"

# Parity on CUDA: f32 within 1e-4, bf16 within 2e-2.
for f in wan_dit_tiny wan_dit_tiny_per_frame wan_vae_tiny umt5_tiny; do
    "$BIN" verify-fixture "$FIX/$f" --devices cuda:0 | tee "$OUT/verify-$f-f32.txt"
    "$BIN" verify-fixture "$FIX/$f" --devices cuda:0 --precision bf16 --tolerance 2e-2 | tee "$OUT/verify-$f-bf16.txt"
done

# The 1.3B chunk forward at 480p: 3 × 1560 query tokens over 21 × 1560 keys, random bf16 weights.
"$BIN" bench dit --configs 1.3b --height 60 --width 104 --context 6 --devices cuda:0 --precision bf16 --iters 5 \
    | tee "$OUT/bench-dit-1.3b.txt"

# FlashForward, Self-Forcing and HiAR on one GPU at 480p with random 1.3B weights, L = 21 and 81
# (serial and batched executors; denoising-path seconds in the table), traces for the per-forward
# cost, peak device memory sampled by nvidia-smi every 100 ms.
for L in 21 81; do
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$OUT/bench-1.3b-L$L-mem.txt" &
    smi=$!
    "$BIN" bench schedules --config 1.3b --random-weights --latents "$L" --height 60 --width 104 --text-tokens 512 \
        --devices cuda:0 --precision bf16 --schedules flashforward,self-forcing,hiar --executors serial,batched \
        --trace "$OUT/traces-L$L" | tee "$OUT/bench-1.3b-L$L.txt"
    kill "$smi"
    echo "schedules L=$L: peak device memory $(sort -n "$OUT/bench-1.3b-L$L-mem.txt" | tail -1) MiB" | tee -a "$OUT/schedules-memory.txt"
done

# Block-sparse attention (issue 7). Device memory: nvidia-smi sampled every 100 ms during each run
# (`bench attention`'s own peak_bytes counts host memory only).
attn() {
    local name=$1; shift
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$OUT/attn-$name-mem.txt" &
    local smi=$!
    "$BIN" bench attention --devices cuda:0 --json "$@" | tee "$OUT/attn-$name.json"
    kill "$smi"
    echo "attn-$name: peak device memory $(sort -n "$OUT/attn-$name-mem.txt" | tail -1) MiB" | tee -a "$OUT/attn-memory.txt"
}
# Kernel parity against the blockwise path on CUDA, f32 and bf16, ragged-free small packed layout
# and a chunk, forward and backward (max_rel_err, grad_max_rel_err in the rows).
for p in f32 bf16; do
    attn "parity-packed-$p" --precision "$p" --layout packed-sft --frames 21 --tokens-per-frame 24 --heads 2 --head-dim 64 --backward
    attn "parity-chunk-$p" --precision "$p" --layout chunk --frames 18 --tokens-per-frame 40 --heads 2 --head-dim 128 --backward
done
# 4,680 queries × 32,760 keys × 12 heads × 128, bf16: the chunk table allows every key, so the
# blockwise row is one unmasked call of Burn's attention (cubek's flash attention on CUDA).
attn chunk-1.3b --precision bf16 --layout chunk --frames 18 --tokens-per-frame 1560 --heads 12 --head-dim 128 --iters 5 \
    --dense-budget-bytes 40000000000
attn chunk-1.3b-bwd --precision bf16 --layout chunk --frames 18 --tokens-per-frame 1560 --heads 12 --head-dim 128 --iters 3 --backward
# The paper's packed SFT layout at 1.3B / 480p: 155 frames × 1,560 tokens, one layer fwd + bwd.
attn packed-1.3b --precision bf16 --layout packed-sft --frames 81 --tokens-per-frame 1560 --heads 12 --head-dim 128 --iters 2 --backward
