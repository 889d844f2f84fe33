#!/usr/bin/env bash
# The paper's training ablations (Tab. 3) at toy scale, each a whole student of its own:
#   scripts/world/ablations.sh [VARIANT...]      # default: per-role no-rebase shared-lora
# * per-role: the shipped recipe (scripts/world/sft.toml), shortened like the others;
# * no-rebase: Phase 1 without time-rebased crops (`rebased_crops = 0`);
# * shared-lora: one adapter both roles share (`lora_shared = true`; the role vectors stay).
# Each variant runs scripts/train-default.sh (Phase 1 from the shipped teacher, Phase 2 against
# it, export) into RUNS/VARIANT with a model folder of its own (links to the shipped codec, text
# encoder, tokenizer and teacher; its student in RUNS/VARIANT/model/transformer/), reusing the
# default model's 20 s latents (CLIPS as there). It is then scored three ways, each with `eval`
# on the held-out prompts of scripts/world/eval.sh:
# * eval-sft: Phase 1 alone (its last checkpoint, the 4 FlashForward stages), PROMPTS prompts of
#   CLIP_SECONDS s;
# * eval: the exported student by scripts/world/compare.sh (ROWS, default the FlashForward row),
#   the same prompts;
# * eval-LONG_SECONDSs: the exported student with FlashForward on long clips, where time rebasing
#   should show: the first LONG_PROMPTS (default 16; 0 skips) prompts at LONG_SECONDS (default
#   65 s, L = 261).
# Resumable like both scripts. SFT_STEPS / DMD_STEPS (default 200 / 40: ≈ 10 + 30 min per variant
# on 2 cores; a long clip ≈ 25 s), DEVICES as in train-default.sh. The export is Phase 2's EMA
# (scripts/world/dmd.toml: decay 0.99), so a Phase 2 of N steps moves it 1 - 0.99^N of the way
# from Phase 1 (16 steps: 15 %, 40: 33 %, 100: 63 %).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-/work/world-runs/ablations}
LATENTS=${LATENTS:-/work/world-runs/default/latents-20s}
PROMPTS=${PROMPTS:-32}
CLIP_SECONDS=${CLIP_SECONDS:-5}
long=${LONG_PROMPTS:-16} long_seconds=${LONG_SECONDS:-65}
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(per-role no-rebase shared-lora)
for variant in "${variants[@]}"; do
    run="$RUNS/$variant" model="$RUNS/$variant/model"
    mkdir -p "$model"
    for d in vae vae-w8 text_encoder tokenizer teacher; do ln -sfn "$(realpath "models/world/$d")" "$model/$d"; done
    ln -sfn "$(realpath "$LATENTS")" "$run/latents-20s"
    sft="$run/sft.toml"
    case $variant in
        per-role) cp scripts/world/sft.toml "$sft" ;;
        no-rebase) sed 's/^rebased_crops = .*/rebased_crops = 0/' scripts/world/sft.toml > "$sft" ;;
        shared-lora) sed '/^\[train\]/a lora_shared = true' scripts/world/sft.toml > "$sft" ;;
        *) echo "unknown variant $variant (per-role, no-rebase, shared-lora)" >&2; exit 1 ;;
    esac
    echo "== $variant"
    MODEL="$model" RUNS="$run" SFT_CONFIG="$sft" SFT_STEPS=${SFT_STEPS:-200} DMD_STEPS=${DMD_STEPS:-40} scripts/train-default.sh
    # Phase 1's run (its latest checkpoint) over the model directory both phases trained in,
    # decoded by the shipped codec like the students.
    bash scripts/world/eval.sh "$run/eval-sft" "$PROMPTS" "$CLIP_SECONDS" --schedule flashforward \
        --model-dir "$run/base" --dit "$run/sft" \
        --vae "$model/vae/diffusion_pytorch_model.safetensors" --vae-config "$model/vae/config.json"
    FF_MODEL_DIR="$model" ROWS=${ROWS:-flashforward} bash scripts/world/compare.sh "$run/eval" "$PROMPTS" "$CLIP_SECONDS"
    [ "$long" -eq 0 ] || FF_MODEL_DIR="$model" bash scripts/world/eval.sh "$run/eval-${long_seconds}s" "$long" "$long_seconds" \
        --schedule flashforward
done
