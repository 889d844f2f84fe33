#!/usr/bin/env bash
# Continues Phase 2 of the default model's student from the installed export (issue 11), so that
# Phase 2 grows across sessions that do not keep their runs: each continuation starts from
# MODEL/transformer/, the shipped weights, and installs its own export only when it scores better.
#   STEPS=300 scripts/world/continue-dmd.sh
#   1. 20 s latents (as scripts/train-default.sh: 256 clips, dataset seed 2; reused when present);
#   2. `train dmd --dit MODEL/transformer --config CONFIG` (default
#      scripts/world/dmd-continue-r128.toml: dmd-continue-critic.toml, the continuation the
#      shipped student had, with room for its roles; the others: dmd-continue.toml,
#      dmd-continue-b8.toml with 8 clips per update, dmd-continue-splice.toml): the export's
#      roles split back into backbone + adapters (`checkpoint::unmerge_roles`), a fresh critic
#      warmed up first, STEPS generator steps (resumable: rerun the same command; to stop early,
#      Ctrl-C saves a checkpoint, and rerunning with STEPS at its step exports it);
#   3. the export and the installed student on the same PROMPTS held-out prompts at 5 s
#      (scripts/world/eval.sh, the shipped codec; default 128: the gate's 32 and 96 more);
#   4. the export replaces MODEL/transformer/ only when its prompt accuracy is higher by more
#      than two standard errors of the paired per-prompt difference (about 0.02 at 128 prompts:
#      a 32-prompt score moves by 0.05-0.1 between checkpoints that are no better or worse,
#      docs/RESULTS.md, "Phase 2 continued from the export"), and writes RUNS/verdict.txt.
# LATENTS, CLIPS: the 20 s latent shards and their clip count (default RUNS/latents-20s, 256;
# scripts/train-default.sh passes its own).
# FROZEN_PLANNER=1: the installed student's planner stays frozen and the renderer trains on its
# anchors (`train dmd --planner`, with a config that sets `[dmd] planner_steps`, e.g.
# scripts/world/dmd-frozen-planner.toml; -s8.toml distils the renderer at eight stages,
# -lowsigma.toml and -shift1.toml draw more of the scores at low noise); the export keeps that
# planner.
# SAMPLE_STAGES=N (with FROZEN_PLANNER=1, whose planner is sampled by Euler steps): the export is
# scored and installed sampled at N renderer stages (`train combine --stages N`, RUNS/sampled),
# e.g. 8 for a renderer distilled at 4 (docs/RESULTS.md, "More renderer stages for the renderer
# trained on uniform score timesteps").
# SEED: the run's seed (use a new one per continuation: another data order and noise);
# DEVICES (default cpu:0,1), RUNS (default /work/world-runs/continue), BIN, MODEL as in
# scripts/train-default.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/flashforward}
MODEL=${MODEL:-models/world}
RUNS=${RUNS:-/work/world-runs/continue}
LATENTS=${LATENTS:-$RUNS/latents-20s}
CLIPS=${CLIPS:-256}
STEPS=${STEPS:-300}
CONFIG=${CONFIG:-scripts/world/dmd-continue-r128.toml}
SEED=${SEED:-1}
PROMPTS=${PROMPTS:-128}
DEVICES=${DEVICES:-cpu:0,1}
NICE=${NICE:-nice -n 5}
[ -x "$BIN" ] || cargo build --release -p ff-cli
mkdir -p "$RUNS"
source scripts/world/stage.sh

# The run's model directory (as scripts/train-default.sh's) and the student it starts from.
student_start "$MODEL" "$RUNS"
BASE="$RUNS/base"

latents() {
    $NICE "$BIN" world latents --model-dir "$MODEL" --out "$LATENTS" --clips "$CLIPS" --seconds 20 --seed 2
    touch "$LATENTS/.complete-$CLIPS"
}
stage latents "$LATENTS/.complete-$CLIPS" latents

dmd() {
    $NICE "$BIN" train dmd --model-dir "$BASE" --out "$RUNS/dmd" --seed "$SEED" --dit "$RUNS/start" \
        --teacher "$MODEL/teacher" --data "$LATENTS" --config "$CONFIG" \
        --steps "$STEPS" --devices "$DEVICES" ${FROZEN_PLANNER:+--planner "$RUNS/start"} $(resume_flag "$RUNS/dmd")
}
stage dmd "$RUNS/dmd/transformer/flashforward.json" dmd

# The student scored: the export, or the export sampled at SAMPLE_STAGES renderer stages.
EXPORT="$RUNS/dmd/transformer"
STUDENT="$EXPORT"
if [ -n "${SAMPLE_STAGES:-}" ]; then
    restage() {
        rm -rf "$RUNS/sampled"
        "$BIN" train combine --planner "$EXPORT" --student "$EXPORT" --stages "$SAMPLE_STAGES" \
            --planner-steps "$(jq .contract.planner_steps "$EXPORT/flashforward.json")" \
            --planner-guidance "$(jq .contract.planner_guidance "$EXPORT/flashforward.json")" --out "$RUNS/sampled"
    }
    stage restage "$RUNS/sampled/flashforward.json" restage
    STUDENT="$RUNS/sampled"
fi

# Scores of the start and of the student, and the verdict.
stage eval-start "$RUNS/eval-start/eval-$PROMPTS.json" student_score "$RUNS" start "$RUNS/start"
stage eval-export "$RUNS/eval-export/eval-$PROMPTS.json" student_score "$RUNS" export "$STUDENT"
install_if_better "$RUNS" export "$STUDENT" "$MODEL/transformer"
