#!/usr/bin/env bash
# Stage "codec" of scripts/train-world.sh: trains the small world's tiny Wan VAE from scratch in
# eight runs of `flashforward train vae`: single cropped frames (scripts/world/vae-image.toml, the
# spatial path), the same continued at a lower peak lr (scripts/world/vae-image2.toml), then
# 41-frame clips from its inflated export (scripts/world/vae-video.toml, the causal caches); then
# a decoder twice as wide on that codec's frozen encoder, again single frames first
# (scripts/world/vae-decoder-image.toml) and 41-frame clips from its inflated export
# (scripts/world/vae-decoder-video.toml, then scripts/world/vae-decoder-video2.toml), made to
# interpolate between latents instead of holding each (scripts/world/vae-decoder-interp.toml,
# then scripts/world/vae-decoder-interp2.toml). Checks the
# held-out PSNR and installs the last run's EMA weights in f16 as models/world/vae/ (`vae export
# --half`, written atomically). Resumable: a finished run (its export exists) is skipped, an
# interrupted one continues with --resume. Prints each run's wall time.
#
#   scripts/world/train-vae.sh                 # defaults below
#   RUNS=/work/world-runs scripts/world/train-vae.sh
#
# BIN: the binary (default: target/release/flashforward, built if absent); MODEL: the shipped
# model folder (default models/world, the codec goes to MODEL/vae, the width-8 codec of the
# third run to MODEL/vae-w8); RUNS: where runs live.
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
    "$BIN" train vae --out "$dir" --config "$config" "$@" "${resume[@]}"   # seed: [train] seed, 0 by default
    echo "codec $name: $((SECONDS - start)) s wall"
}
run vae-image scripts/world/vae-image.toml
run vae-image2 scripts/world/vae-image2.toml --model-dir "$RUNS/vae-image/vae"
run vae-video scripts/world/vae-video.toml --model-dir "$RUNS/vae-image2/vae"
run vae-dec-image scripts/world/vae-decoder-image.toml --model-dir "$RUNS/vae-video/vae"
run vae-dec-video scripts/world/vae-decoder-video.toml --model-dir "$RUNS/vae-dec-image/vae"
run vae-dec-video2 scripts/world/vae-decoder-video2.toml --model-dir "$RUNS/vae-dec-video/vae"
run vae-dec-interp scripts/world/vae-decoder-interp.toml --model-dir "$RUNS/vae-dec-video2/vae"
run vae-dec-interp2 scripts/world/vae-decoder-interp2.toml --model-dir "$RUNS/vae-dec-interp/vae"

mkdir -p "$(dirname "$OUT")"
# The width-8 codec beside it, as MODEL/vae-w8: the same encoder with the narrower decoder, which
# Phase 2 of scripts/train-default.sh decodes its image heads with. Installed before the codec,
# so that a codec in place means both are.
W8="$(dirname "$OUT")/vae-w8"
rm -rf "$W8.tmp"
cp -r "$RUNS/vae-video/vae" "$W8.tmp"
rm -rf "$W8"
mv "$W8.tmp" "$W8"
"$BIN" vae export --run "$RUNS/vae-dec-interp2" --encoder "$RUNS/vae-dec-video/vae" --half --out "$OUT"
"$BIN" vae eval --vae "$OUT" --clips 8 --seconds 5
