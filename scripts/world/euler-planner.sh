#!/usr/bin/env bash
# Gives the default model's student the planner of a longer Phase 1, sampled by guided Euler steps
# (issue 11; docs/RESULTS.md, "The Phase 1 planner, sampled by guided Euler steps"), and installs
# it when it scores better:
#   SFT=/work/world-runs/default/sft scripts/world/euler-planner.sh
#   1. Phase 1 continued: a copy of the Phase 1 run SFT (scripts/train-default.sh's, 600 steps)
#      trained on to SFT_STEPS steps (default 1000) with the same config and seed (resumable).
#      SFT=installed instead starts a Phase 1 run from the installed student's planner (merged,
#      with fresh role adapters that start as that planner) for SFT_STEPS steps, seed SEED
#      (default 20): a continuation once the run it came from is gone;
#   2. `train combine`: its planner role merged, beside the installed student's renderer
#      (MODEL/transformer/, copied first), sampled by PLANNER_STEPS Euler steps (default 50)
#      guided at GUIDANCE (default 5) against the empty prompt: the `planner_steps` and
#      `planner_guidance` of the student's contract in its flashforward.json;
#   3. both students on the same PROMPTS held-out prompts at 5 s (default 128);
#   4. the combined student replaces MODEL/transformer/ only when its prompt accuracy is higher by
#      more than two standard errors of the paired per-prompt difference (as
#      scripts/world/continue-dmd.sh), and RUNS/verdict.txt records the verdict.
# LATENTS (required: the Phase 1 run's 20 s latent shards; train-default.sh passes its own),
# SFT_CONFIG (default scripts/world/sft.toml), DEVICES (default cpu:0,1), RUNS (default
# /work/world-runs/planner), BIN, MODEL, NICE as in scripts/train-default.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/flashforward}
MODEL=${MODEL:-models/world}
RUNS=${RUNS:-/work/world-runs/planner}
SFT=${SFT:?the Phase 1 run to continue (scripts/train-default.sh: RUNS/sft), or installed}
LATENTS=${LATENTS:?the 20 s latent shards Phase 1 trained on (scripts/train-default.sh: RUNS/latents-20s)}
SFT_CONFIG=${SFT_CONFIG:-scripts/world/sft.toml}
SFT_STEPS=${SFT_STEPS:-1000}
PLANNER_STEPS=${PLANNER_STEPS:-50}
GUIDANCE=${GUIDANCE:-5}
PROMPTS=${PROMPTS:-128}
DEVICES=${DEVICES:-cpu:0,1}
NICE=${NICE:-nice -n 5}
[ -x "$BIN" ] || cargo build --release -p ff-cli
mkdir -p "$RUNS"
source scripts/world/stage.sh

student_start "$MODEL" "$RUNS"
BASE="$RUNS/base"

# 1. Phase 1 on to SFT_STEPS steps, in a copy (SFT stays the 600-step run Phase 2 started from),
# or from the installed planner: BASE with the teacher's config beside the planner's weights.
sft() {
    local base=$BASE seed=0 resume=--resume
    if [ "$SFT" = installed ]; then
        base="$RUNS/base-planner" seed=${SEED:-20} resume=$(resume_flag "$RUNS/sft")
        if [ ! -e "$base/transformer/config.json" ]; then
            rm -rf "$base"; mkdir -p "$base/transformer.tmp"
            cp "$MODEL/teacher/config.json" "$RUNS/start/planner/diffusion_pytorch_model.safetensors" "$base/transformer.tmp/"
            for d in text_encoder tokenizer vae; do ln -sfn "$(realpath "$BASE/$d")" "$base/$d"; done
            mv "$base/transformer.tmp" "$base/transformer"
        fi
    elif [ ! -d "$RUNS/sft" ]; then
        rm -rf "$RUNS/sft.tmp"; cp -r "$SFT" "$RUNS/sft.tmp"; mv "$RUNS/sft.tmp" "$RUNS/sft"
    fi
    $NICE "$BIN" train sft --model-dir "$base" --out "$RUNS/sft" --seed "$seed" --data "$LATENTS" --config "$SFT_CONFIG" \
        --steps "$SFT_STEPS" --devices "$DEVICES" $resume
    touch "$RUNS/sft/.complete-$SFT_STEPS"
}
stage sft "$RUNS/sft/.complete-$SFT_STEPS" sft

# 2. The combined student.
combine() {
    rm -rf "$RUNS/combined"
    "$BIN" train combine --planner "$RUNS/sft" --student "$RUNS/start" --planner-steps "$PLANNER_STEPS" \
        --planner-guidance "$GUIDANCE" --out "$RUNS/combined"
}
stage combine "$RUNS/combined/flashforward.json" combine

# 3. Scores; 4. the verdict.
stage eval-start "$RUNS/eval-start/eval-$PROMPTS.json" student_score "$RUNS" start "$RUNS/start"
stage eval-combined "$RUNS/eval-combined/eval-$PROMPTS.json" student_score "$RUNS" combined "$RUNS/combined"
install_if_better "$RUNS" combined "$RUNS/combined" "$MODEL/transformer"
