#!/usr/bin/env bash
# Trains the default model of `flashforward generate` (issue 11): the small world's FlashForward
# student, from its teacher, on the CPU, stage by stage:
#   20 s latent shards -> Phase 1 SFT from the teacher -> Phase 2 DMD -> export -> Phase 2
#   continued with a faster critic -> Phase 1's planner at 1,000 steps, sampled by guided Euler
#   steps, beside that renderer -> the renderer's Phase 2 on that planner's anchors, sampled at
#   eight stages -> check.
# Needs MODEL/{vae,text_encoder,tokenizer}/ and the teacher MODEL/teacher/ (scripts/train-world.sh
# makes them). Resumable: a stage whose final output exists is skipped; an interrupted training
# resumes from its last checkpoint (train --resume), an interrupted latent stage from its last
# complete shard. Each stage prints its wall time. Runs, checkpoints and data go to RUNS, outside
# the repository; the student is installed as MODEL/transformer/ (its merged planner and renderer
# and flashforward.json), which `generate` reads when no model flag is given.
#
#   scripts/train-default.sh                                   # everything, configs as shipped
#   CLIPS=64 SFT_STEPS=200 DMD_STEPS=50 PLANNER_SFT_STEPS=300 scripts/train-default.sh
#
# BIN: the binary (default target/release/flashforward, built if absent); SFT_CONFIG / DMD_CONFIG:
# the phases' configs (default scripts/world/{sft,dmd}.toml); SFT_STEPS / DMD_STEPS override their
# step counts, PLANNER_SFT_STEPS the steps Phase 1 is continued to for the planner (1000); CLIPS:
# 20 s training clips (scene seeds 0..CLIPS of dataset seed 2); DEVICES: the phases' data-parallel
# workers (`--devices`, e.g. cpu:0,1: two CPU workers overlap the single-threaded element-wise ops
# of a step; default: the configs' `devices`).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/flashforward}
MODEL=${MODEL:-models/world}
RUNS=${RUNS:-/work/world-runs/default}
CLIPS=${CLIPS:-256}
SFT_CONFIG=${SFT_CONFIG:-scripts/world/sft.toml}
DMD_CONFIG=${DMD_CONFIG:-scripts/world/dmd.toml}
PROMPT=${PROMPT:-a red circle bounces on a black background}
NICE=${NICE:-nice -n 5}
[ -x "$BIN" ] || cargo build --release -p ff-cli
for need in vae/config.json vae-w8/config.json text_encoder/config.json tokenizer/tokenizer.json teacher/diffusion_pytorch_model.safetensors; do
    [ -f "$MODEL/$need" ] || { echo "missing $MODEL/$need: run scripts/train-world.sh first" >&2; exit 1; }
done
mkdir -p "$RUNS"

source scripts/world/stage.sh

BASE="$RUNS/base"
student_base "$MODEL" "$BASE"

# train PHASE RUN ARGS...: `train PHASE`, resuming RUN when it has a checkpoint.
train() {
    local phase=$1 run=$2; shift 2
    $NICE "$BIN" train "$phase" --model-dir "$BASE" --out "$run" --seed 0 "$@" \
        ${DEVICES:+--devices "$DEVICES"} $(resume_flag "$run")
}

# 1. 20 s latent shards (L = 81) straight from the generator.
LATENTS="$RUNS/latents-20s"
latents() {
    $NICE "$BIN" world latents --model-dir "$MODEL" --out "$LATENTS" --clips "$CLIPS" --seconds 20 --seed 2
    touch "$LATENTS/.complete-$CLIPS"
}
stage latents "$LATENTS/.complete-$CLIPS" latents

# 2. Phase 1: packed time-rebased SFT of the roles from the teacher.
sft() {
    train sft "$RUNS/sft" --data "$LATENTS" --config "$SFT_CONFIG" ${SFT_STEPS:+--steps "$SFT_STEPS"}
    touch "$RUNS/sft/.complete"
}
stage sft "$RUNS/sft/.complete" sft

# 3. Phase 2: DMD against the teacher with a LoRA critic; exports RUN/transformer/ at the end.
dmd() {
    train dmd "$RUNS/dmd" --dit "$RUNS/sft" --teacher "$MODEL/teacher" --data "$LATENTS" --config "$DMD_CONFIG" \
        ${DMD_STEPS:+--steps "$DMD_STEPS"}
}
stage dmd "$RUNS/dmd/transformer/flashforward.json" dmd

# 4. Install the export as the default model's student (replaced whole, never half-written),
# over the shipped one: the stage is done when this run installed its own.
install_default() {
    install_export "$RUNS/dmd/transformer" "$MODEL/transformer"
    touch "$RUNS/.installed"
}
stage export "$RUNS/.installed" install_default

# 5. Phase 2 continued from that export with the faster critic (scripts/world/continue-dmd.sh,
# scripts/world/dmd-continue-critic.toml, 100 generator steps, seed 4), installed when it beats
# the export on 128 paired held-out prompts by two standard errors: the shipped student's last step
# (docs/RESULTS.md, "Phase 2 continued with a critic that follows the student").
more_dmd() {
    MODEL="$MODEL" RUNS="$RUNS/continue" LATENTS="$LATENTS" CLIPS="$CLIPS" BIN="$BIN" NICE="$NICE" \
        CONFIG=scripts/world/dmd-continue-critic.toml STEPS=100 SEED=4 scripts/world/continue-dmd.sh
}
stage more-dmd "$RUNS/continue/verdict.txt" more_dmd

# 6. The planner of Phase 1 continued to 1,000 steps (a copy of stage 2's run), sampled by 50
# Euler steps guided at 5, beside the installed renderer (scripts/world/euler-planner.sh, `train
# combine`), installed when it beats the installed student on 128 paired held-out prompts by two
# standard errors: the shipped student (docs/RESULTS.md, "The Phase 1 planner, sampled by guided
# Euler steps").
euler_planner() {
    MODEL="$MODEL" RUNS="$RUNS/planner" SFT="$RUNS/sft" LATENTS="$LATENTS" SFT_CONFIG="$SFT_CONFIG" BIN="$BIN" NICE="$NICE" \
        DEVICES="${DEVICES:-cpu:0,1}" SFT_STEPS="${PLANNER_SFT_STEPS:-1000}" PLANNER_STEPS=50 GUIDANCE=5 scripts/world/euler-planner.sh
}
stage euler-planner "$RUNS/planner/verdict.txt" euler_planner

# 7. The renderer's Phase 2 on the frozen planner's anchors with uniform score timesteps
# (scripts/world/dmd-frozen-planner-shift1.toml, 100 generator steps, seed 12), sampled at eight
# renderer stages (distilled at four), installed when it beats the installed student on 128 paired
# held-out prompts by two standard errors: the shipped student (docs/RESULTS.md, "More renderer
# stages for the renderer trained on uniform score timesteps").
renderer() {
    MODEL="$MODEL" RUNS="$RUNS/renderer" LATENTS="$LATENTS" CLIPS="$CLIPS" BIN="$BIN" NICE="$NICE" \
        DEVICES="${DEVICES:-cpu:0,1}" FROZEN_PLANNER=1 CONFIG=scripts/world/dmd-frozen-planner-shift1.toml \
        STEPS=100 SEED=12 SAMPLE_STAGES=8 scripts/world/continue-dmd.sh
}
stage renderer "$RUNS/renderer/verdict.txt" renderer

# 8. Check: README's main command on the installed model (no model flags), scored by `eval`.
check() {
    FF_MODEL_DIR="$MODEL" $NICE "$BIN" generate --prompt "$PROMPT" --seconds 5 --out "$RUNS/check.mp4"
    "$BIN" eval "$RUNS/check.mp4" --prompt "$PROMPT" --json | tee "$RUNS/check.json"
}
stage check "$RUNS/check.json" check
du -sh "$MODEL"/* && du -sh "$MODEL"
