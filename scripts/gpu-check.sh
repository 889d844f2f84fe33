#!/usr/bin/env bash
# The device checks of the backbone, schedule and block-sparse attention (issue 7) issues, as one
# prepared run on one CUDA GPU.
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

# Schedules on one GPU at L = 81 (serial and batched executors), traces for the per-forward cost.
"$BIN" bench schedules --config 1.3b --random-weights --latents 81 --height 60 --width 104 --text-tokens 512 \
    --devices cuda:0 --precision bf16 --schedules flashforward,self-forcing,hiar --executors serial,batched \
    --trace "$OUT/traces" | tee "$OUT/bench-1.3b.txt"

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
