#!/usr/bin/env bash
# Trains the small world from scratch on the CPU, stage by stage:
#   codec -> text encoder/tokenizer -> latent shards -> teacher (three runs; MODEL/teacher/) -> eval.
# The default model's student is trained from the teacher afterwards by scripts/train-default.sh.
# Resumable: a stage whose final output exists is skipped; a stage that was interrupted resumes
# from its last checkpoint (train --resume) or last complete shard (world latents). Each stage
# prints its wall time. The shipped model is MODEL (default models/world); runs, checkpoints and
# data go to RUNS (default /work/world-runs), outside the repository.
#
#   scripts/train-world.sh                      # everything
#   CLIPS=512 TEACHER_STEPS=2000 GROW_STEPS=1000 MORE_STEPS=1000 scripts/train-world.sh   # smaller
# (TEACHER_STEPS / GROW_STEPS / MORE_STEPS / MORE2_STEPS override the four teacher runs' step counts.)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/flashforward}
MODEL=${MODEL:-models/world}
RUNS=${RUNS:-/work/world-runs}
CLIPS=${CLIPS:-2048}          # training clips of 5 s (21 latents), a fifth with two objects
EVAL_PROMPTS=${EVAL_PROMPTS:-32}
EVAL_STEPS=${EVAL_STEPS:-50}
GUIDANCE=${GUIDANCE:-5}
NICE=${NICE:-nice -n 5}
[ -x "$BIN" ] || cargo build --release -p ff-cli
mkdir -p "$RUNS" "$MODEL"

source scripts/world/stage.sh

# 1. Codec (the vae engineer's script): must leave MODEL/vae/{config.json,diffusion_pytorch_model.safetensors}
#    and the width-8 codec Phase 2 of scripts/train-default.sh decodes with, MODEL/vae-w8/.
stage codec "$MODEL/vae/diffusion_pytorch_model.safetensors" bash scripts/world/train-vae.sh

# 2. Tokenizer over the domain's vocabulary and the frozen random tiny umT5.
stage text "$MODEL/text_encoder/model.safetensors" $NICE "$BIN" world text --out "$MODEL" --seed 0

# 3. Latent shards straight from the generator (scene seeds 0..CLIPS of dataset seed 1).
latents() {
    $NICE "$BIN" world latents --model-dir "$MODEL" --out "$RUNS/latents" --clips "$CLIPS" --seconds 5 --seed 1 --two-objects 0.2
    touch "$RUNS/latents/.complete-$CLIPS"
}
stage latents "$RUNS/latents/.complete-$CLIPS" latents

# 4. Teacher, in four runs (each skipped once it has exported, else resumed from its newest
#    checkpoint): 4 blocks from random weights (scripts/world/teacher.toml); its export grown to
#    8 blocks and trained on (scripts/world/teacher-grow.toml); that export trained on again at 8
#    blocks with another seed (scripts/world/teacher-more.toml), and once more, 5,000 steps with
#    seed 2 (as scripts/world/continue-teacher.sh ran it), whose export is installed as
#    MODEL/teacher.
teacher_run() {
    local run=$1 config=$2 seed=$3; shift 3
    [ -e "$run/transformer/diffusion_pytorch_model.safetensors" ] && return
    local resume=()
    ls -d "$run"/step-* >/dev/null 2>&1 && resume=(--resume)
    $NICE "$BIN" train teacher --model-dir "$MODEL" --data "$RUNS/latents" --out "$run" --config "$config" --seed "$seed" \
        "$@" "${resume[@]}"
}
teacher() {
    teacher_run "$RUNS/teacher" scripts/world/teacher.toml 0 ${TEACHER_STEPS:+--steps "$TEACHER_STEPS"}
    teacher_run "$RUNS/teacher-grown" scripts/world/teacher-grow.toml 0 --init "$RUNS/teacher/transformer" \
        ${GROW_STEPS:+--steps "$GROW_STEPS"}
    teacher_run "$RUNS/teacher-more" scripts/world/teacher-more.toml 1 --init "$RUNS/teacher-grown/transformer" \
        ${MORE_STEPS:+--steps "$MORE_STEPS"}
    teacher_run "$RUNS/teacher-more2" scripts/world/teacher-more.toml 2 --init "$RUNS/teacher-more/transformer" \
        --steps "${MORE2_STEPS:-5000}"
    install_export "$RUNS/teacher-more2/transformer" "$MODEL/teacher"
}
stage teacher "$MODEL/teacher/diffusion_pytorch_model.safetensors" teacher

# 5. Eval: 50-step CFG samples of held-out prompts (scripts/world/eval.sh), 5 s each.
evaluate() {
    teacher_eval "$RUNS/eval" "$EVAL_PROMPTS" "$MODEL/teacher" "$MODEL" --steps "$EVAL_STEPS" --guidance "$GUIDANCE"
    cat "$RUNS/eval/eval.json"
}
stage eval "$RUNS/eval/eval.json" evaluate
du -sh "$MODEL"/*
