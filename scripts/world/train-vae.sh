#!/usr/bin/env bash
# Stage "codec" of scripts/train-world.sh: trains the small world's tiny Wan VAE from scratch
# (`flashforward train vae`, config scripts/world/vae.toml), checks its held-out PSNR and installs
# it as models/world/vae/. Resumable: a stage whose output exists is skipped, and a run directory
# with checkpoints continues with --resume. Prints the stage's wall time.
#
#   scripts/world/train-vae.sh                 # defaults below
#   RUNS=/work/world-runs STEPS=3000 scripts/world/train-vae.sh
#
# BIN: the binary (default: target/release/flashforward, built if absent); MODEL: the shipped
# model folder (default models/world, the codec goes to MODEL/vae); RUNS: where runs live.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-/work/world-runs}
RUN=${RUN:-$RUNS/vae}
OUT=${OUT:-${MODEL:-models/world}/vae}
CONFIG=${CONFIG:-scripts/world/vae.toml}
BIN=${BIN:-target/release/flashforward}
start=$(date +%s)
if [ -f "$OUT/diffusion_pytorch_model.safetensors" ] && [ -f "$OUT/config.json" ]; then
    echo "codec: $OUT exists, skipped"
    exit 0
fi
[ -x "$BIN" ] || cargo build --release -p ff-cli
steps=()
[ -n "${STEPS:-}" ] && steps=(--steps "$STEPS")
resume=()
ls -d "$RUN"/step-* >/dev/null 2>&1 && resume=(--resume)
MIMALLOC_PURGE_DELAY=${MIMALLOC_PURGE_DELAY:--1} "$BIN" train vae --out "$RUN" --config "$CONFIG" "${steps[@]}" "${resume[@]}"
"$BIN" vae eval --vae "$RUN/vae" --clips 8 --seconds 5
mkdir -p "$(dirname "$OUT")"
rm -rf "$OUT.tmp"
cp -r "$RUN/vae" "$OUT.tmp"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "codec: $OUT written in $(( $(date +%s) - start )) s wall"
