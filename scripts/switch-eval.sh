#!/usr/bin/env bash
# The small-world prompt-switch targets (issue 50; docs/RESULTS.md, "Prompt switching"):
#   scripts/switch-eval.sh DIR [PAIRS] [generate flags...]
# draws 64 held-out prompts (dataset seed 7, as scripts/world/eval.sh; default 32 pairs:
# pair i, of 32, is prompt i switching to prompt 32 + i; PAIRS runs the first PAIRS pairs), and for each pair generates with the default model, at
# 10 s and noise seed 1000 + i:
#   DIR/alone_a_NN.mp4  prompt A alone,  DIR/alone_b_NN.mp4  prompt B alone,
#   DIR/switch_NN.mp4   A with `--switch 5=B` (and the extra generate flags),
# scores each with `eval --switch 5=...` (the alone videos on their own prompt in both segments)
# and writes DIR/switch.json: per segment the mean prompt accuracy switched and alone, and their
# paired differences (mean ± one standard error), the mean and slowest `switch_seconds`, the share
# of pairs whose switch is shown at all, and the seams at the switch. Targets: each segment within
# 0.1 of alone; the switch shown within 1 s.
# Resumable: existing videos are kept (MP4s are written atomically); pass a fresh DIR per policy,
# or reuse one DIR's alone videos by pointing ALONE=DIR0 at it.
# BIN: the binary (default target/release/flashforward); NICE: the priority prefix; JOBS: videos
# generated at once (default 1; each generation is deterministic, so this changes only speed).
set -euo pipefail
BIN=${BIN:-target/release/flashforward}
NICE=${NICE:-nice -n 5}
JOBS=${JOBS:-1}
dir=$1 pairs=${2:-32}
shift $(( $# < 2 ? $# : 2 ))
alone=${ALONE:-$dir}
mkdir -p "$dir" "$alone"
[ -e "$alone/prompts.txt" ] || {
    "$BIN" world clips --out "$alone/prompts" --clips 64 --seconds 1 --seed 7 >/dev/null
    cut -d'"' -f4 "$alone/prompts/captions.jsonl" > "$alone/prompts.txt"
}
mapfile -t prompts < "$alone/prompts.txt"
gen() { # out prompt seed [flags...]: in the background, at most JOBS at once
    local out=$1 prompt=$2 seed=$3
    shift 3
    [ -e "$out" ] && return
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    $NICE "$BIN" generate "$@" --prompt "$prompt" --seconds 10 --seed "$seed" --out "$out" >/dev/null 2>>"$dir/generate.log" &
}
score() { # video first second
    "$BIN" eval "$1" --prompt "$2" --switch "5=$3" --json
}
for ((i = 0; i < pairs; i++)); do
    a=${prompts[$i]} b=${prompts[$((32 + i))]} n=$(printf %02d $i) seed=$((1000 + i))
    gen "$alone/alone_a_$n.mp4" "$a" $seed
    gen "$alone/alone_b_$n.mp4" "$b" $seed
    gen "$dir/switch_$n.mp4" "$a" $seed --switch "5=$b" "$@"
done
wait
: > "$dir/rows.jsonl"
for ((i = 0; i < pairs; i++)); do
    a=${prompts[$i]} b=${prompts[$((32 + i))]} n=$(printf %02d $i)
    jq -nc --arg a "$a" --arg b "$b" \
        --argjson s "$(score "$dir/switch_$n.mp4" "$a" "$b")" \
        --argjson sa "$(score "$alone/alone_a_$n.mp4" "$a" "$a")" \
        --argjson sb "$(score "$alone/alone_b_$n.mp4" "$b" "$b")" \
        '{a: $a, b: $b,
          first: $s.segments[0].prompt_accuracy, second: $s.segments[1].prompt_accuracy,
          first_alone: $sa.segments[0].prompt_accuracy, second_alone: $sb.segments[1].prompt_accuracy,
          switch_seconds: $s.switch_seconds, seam: $s.seams.switch, seam_alone: $sb.seams.switch}' >> "$dir/rows.jsonl"
done
jq -s '
  def mean: add / length;
  def se: (map(.) | mean) as $m | ((map((. - $m) * (. - $m)) | add) / (length - 1) / length) | sqrt;
  def paired(f; g): map(f - g) | {mean: mean, se: se};
  {pairs: length,
   first: {switched: (map(.first) | mean), alone: (map(.first_alone) | mean), diff: paired(.first; .first_alone)},
   second: {switched: (map(.second) | mean), alone: (map(.second_alone) | mean), diff: paired(.second; .second_alone)},
   switch_shown: ((map(select(.switch_seconds != null)) | length) / length),
   switch_seconds: (map(.switch_seconds | select(. != null)) | if length > 0 then mean else null end),
   switch_seconds_max: (map(.switch_seconds | select(. != null)) | max),
   within_1s: ((map(select(.switch_seconds != null and .switch_seconds <= 1)) | length) / length),
   seam_switch: (map(.seam) | mean), seam_same_time_alone: (map(.seam_alone) | mean)}' "$dir/rows.jsonl" > "$dir/switch.json.tmp"
mv "$dir/switch.json.tmp" "$dir/switch.json"
cat "$dir/switch.json"
