#!/usr/bin/env bash
# Stage "codec" of scripts/train-world.sh: trains the small world's tiny Wan VAE from scratch in
# three runs of `flashforward train vae`: single cropped frames (scripts/world/vae-image.toml, the
# spatial path), the same continued at a lower peak lr (scripts/world/vae-image2.toml), then
# 41-frame clips from its inflated export (scripts/world/vae-video.toml, the causal caches). Checks the held-out PSNR and installs the codec as models/world/vae/. Resumable: a
# finished run (its export exists) is skipped, an interrupted one continues with --resume.
# Prints each run's wall time.
#
#   scripts/world/train-vae.sh                 # defaults below
#   RUNS=/work/world-runs scripts/world/train-vae.sh
#
# BIN: the binary (default: target/release/flashforward, built if absent); MODEL: the shipped
# model folder (default models/world, the codec goes to MODEL/vae); RUNS: where runs live.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-/work/world-runs}
OUT=${OUT:-${MODEL:-models/world}/vae}
BIN=${BIN:-target/release/flashforward}
WEIGHTS=diffusion_pytorch_model.safetensors
if [ -f "$OUT/$WEIGHTS" ] && [ -f "$OUT/config.json" ]; then
    echo "codec: $OUT exists, skipped"
    exit 0
fi
[ -x "$BIN" ] || cargo build --release -p ff-cli

# run NAME CONFIG [FLAGS...]: trains RUNS/NAME unless its export RUNS/NAME/vae exists.
run() {
    local name=$1 config=$2; shift 2
    local dir="$RUNS/$name" start=$SECONDS resume=()
    if [ -f "$dir/vae/$WEIGHTS" ]; then echo "codec $name: done"; return; fi
    ls -d "$dir"/step-* >/dev/null 2>&1 && resume=(--resume)
    "$BIN" train vae --out "$dir" --config "$config" --seed 0 "$@" "${resume[@]}"
    echo "codec $name: $((SECONDS - start)) s wall"
}
run vae-image scripts/world/vae-image.toml
run vae-image2 scripts/world/vae-image2.toml --model-dir "$RUNS/vae-image/vae"
run vae-video scripts/world/vae-video.toml --model-dir "$RUNS/vae-image2/vae"

"$BIN" vae eval --vae "$RUNS/vae-video/vae" --clips 8 --seconds 5
mkdir -p "$(dirname "$OUT")"
rm -rf "$OUT.tmp"
cp -r "$RUNS/vae-video/vae" "$OUT.tmp"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
