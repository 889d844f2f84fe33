#!/usr/bin/env bash
# The default model's schedule comparison and inference ablations (issue 11), one trained student:
#   scripts/world/compare.sh OUT [PROMPTS] [SECONDS]
# Every row samples the same PROMPTS held-out prompts (scripts/world/eval.sh: dataset seed 7, noise
# seed 1000 + i) for SECONDS with the default model (no model flags; $FF_MODEL_DIR overrides), on
# the serial executor, and is scored by `eval` into OUT/ROW/eval.json. The first WAVEFRONT prompts
# are then drawn again on the wavefront executor (one worker per stage) to time it beside serial
# and to check that its MP4s are the serial ones, byte for byte. OUT/table.md collects the figures:
# eval metrics (the anchor seam at Δ = 10 for every row, a control where a schedule has no
# anchors), forwards per video (as `generate` reports them) and the mean denoising-path wall time
# (generate's "denoising path", first forward to final latents, no text encoder, no VAE).
# Resumable like eval.sh. BIN, NICE as there; WAVEFRONT (default 4); ROWS: a subset of the row
# names below (default all).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/flashforward}
NICE=${NICE:-nice -n 5}
WAVEFRONT=${WAVEFRONT:-4}
out=$1 count=${2:-32} seconds=${3:-5}
declare -A flags=(
    [flashforward]="--schedule flashforward"
    [self-forcing]="--schedule self-forcing"
    [hiar]="--schedule hiar"
    [n-c-causal-rcm]="--schedule n-c-causal-rcm"
    [history-only]="--schedule flashforward --no-anchors"
    [anchors-only]="--schedule flashforward --no-history"
    [splice]="--schedule flashforward --splice"
)
ROWS=${ROWS:-flashforward self-forcing hiar n-c-causal-rcm history-only anchors-only splice}
mkdir -p "$out"
# mean of generate's "denoising path X s" over a log
denoise_mean() { grep -o 'denoising path [0-9.]*' "$1" | awk '{ s += $3; n++ } END { if (n) printf "%.3f", s / n; else print "-" }'; }
table="$out/table.md.tmp"
{
    echo "| row | flags | prompt acc. | colour | shape | motion | identity | anchor seam / interior | anchor seam / latent boundary | forwards | serial s | wavefront s | wavefront = serial bytes |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
} > "$table"
for row in $ROWS; do
    f=${flags[$row]}
    # shellcheck disable=SC2086 # flags are words
    BIN="$BIN" NICE="$NICE" bash scripts/world/eval.sh "$out/$row" "$count" "$seconds" $f --executor serial
    wave="$out/$row/wavefront"
    mkdir -p "$wave"
    same=yes
    for i in $(seq 0 $((WAVEFRONT - 1))); do
        name=sample_$(printf %02d "$i").mp4
        prompt=$(sed -n "$((i + 1))p" "$out/$row/prompts.txt")
        # shellcheck disable=SC2086
        [ -e "$wave/$name" ] || $NICE "$BIN" generate $f --executor wavefront --prompt "$prompt" --seconds "$seconds" \
            --seed $((1000 + i)) --out "$wave/$name" >/dev/null 2>>"$wave/generate.log"
        cmp -s "$wave/$name" "$out/$row/$name" || same=no
    done
    # the forwards generate ran (its contract is the student's, which `plan` does not read)
    forwards=$(grep -o '[0-9]* forwards (' "$out/$row/generate.log" | head -1 | cut -d' ' -f1)
    jq -r --arg row "$row" --arg f "$f" --arg fw "$forwards" --arg s "$(denoise_mean "$out/$row/generate.log")" \
        --arg w "$(denoise_mean "$wave/generate.log")" --arg same "$same" \
        '"| \($row) | `\($f)` | \(.prompt_accuracy*1000|round/1000) | \(.colour_accuracy*1000|round/1000) | \(.shape_accuracy*1000|round/1000) | \(.motion_accuracy*1000|round/1000) | \(.identity_persistence*1000|round/1000) | \(.seams.anchor/.seams.interior*100|round/100) | \(.seams.anchor/.seams.latent_boundary*100|round/100) | \($fw) | \($s) | \($w) | \($same) |"' \
        "$out/$row/eval.json" >> "$table"
done
mv "$table" "$out/table.md"
cat "$out/table.md"
