#!/usr/bin/env bash
# The paper's training ablations (Tab. 3) at toy scale, each a whole student of its own:
#   scripts/world/ablations.sh [VARIANT...]      # default: per-role no-rebase shared-lora
# * per-role: the shipped recipe (scripts/world/sft.toml), shortened like the others;
# * no-rebase: Phase 1 without time-rebased crops (`rebased_crops = 0`);
# * shared-lora: one adapter both roles share (`lora_shared = true`; the role vectors stay).
# Each variant runs scripts/train-default.sh (Phase 1 from the shipped teacher, Phase 2 against
# it, export) into RUNS/VARIANT with a model folder of its own (links to the shipped codec, text
# encoder, tokenizer and teacher; its student in RUNS/VARIANT/model/transformer/), reusing the
# default model's 20 s latents (CLIPS as there), then scores it with scripts/world/compare.sh
# (ROWS, default the FlashForward row; PROMPTS held-out prompts of CLIP_SECONDS s). Resumable like
# both scripts.
# SFT_STEPS / DMD_STEPS (default 200 / 40: ≈ 10 + 30 min per variant on 2 cores), DEVICES as in
# train-default.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-/work/world-runs/ablations}
LATENTS=${LATENTS:-/work/world-runs/default/latents-20s}
PROMPTS=${PROMPTS:-32}
CLIP_SECONDS=${CLIP_SECONDS:-5}
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(per-role no-rebase shared-lora)
for variant in "${variants[@]}"; do
    run="$RUNS/$variant" model="$RUNS/$variant/model"
    mkdir -p "$model"
    for d in vae text_encoder tokenizer teacher; do ln -sfn "$(realpath "models/world/$d")" "$model/$d"; done
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
    FF_MODEL_DIR="$model" ROWS=${ROWS:-flashforward} bash scripts/world/compare.sh "$run/eval" "$PROMPTS" "$CLIP_SECONDS"
done
