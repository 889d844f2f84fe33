#!/usr/bin/env bash
# Scores a small-world model on held-out prompts:
#   scripts/world/eval.sh DIR PROMPTS SECONDS [generate flags...]
# draws PROMPTS prompts from held-out scenes (dataset seed 7, one object each; training scenes use
# dataset seeds 1 and 2), generates each for SECONDS with the given `generate` flags (noise seed
# 1000 + i; 64×64 px), scores the videos with `eval` and writes DIR/eval.json and DIR/plots/.
# Resumable: a video that exists is not generated again (MP4s are written atomically).
# BIN: the binary (default target/release/flashforward); NICE: the priority prefix.
set -euo pipefail
BIN=${BIN:-target/release/flashforward}
NICE=${NICE:-nice -n 5}
dir=$1 count=$2 seconds=$3
shift 3
mkdir -p "$dir"
"$BIN" world clips --out "$dir/prompts" --clips "$count" --seconds 1 --seed 7 >/dev/null
cut -d'"' -f4 "$dir/prompts/captions.jsonl" > "$dir/prompts.txt"
videos=() i=0
while IFS= read -r prompt; do
    out="$dir/sample_$(printf %02d $i).mp4"
    [ -e "$out" ] || $NICE "$BIN" generate "$@" --prompt "$prompt" --seconds "$seconds" --height 64 --width 64 \
        --seed $((1000 + i)) --out "$out" >/dev/null 2>>"$dir/generate.log"
    videos+=("$out"); i=$((i + 1))
done < "$dir/prompts.txt"
"$BIN" eval "${videos[@]}" --prompts "$dir/prompts.txt" --json --plots "$dir/plots" > "$dir/eval.json.tmp"
mv "$dir/eval.json.tmp" "$dir/eval.json"
