# Sourced by scripts/train-world.sh, scripts/train-default.sh and scripts/world/continue-dmd.sh.
# stage NAME DONE-FILE COMMAND...: runs COMMAND unless DONE-FILE exists, printing its wall time.
stage() {
    local name=$1 done=$2; shift 2
    if [ -e "$done" ]; then echo "== $name: done ($done)"; return; fi
    echo "== $name"
    local start=$SECONDS
    "$@"
    echo "== $name: $((SECONDS - start)) s wall"
}

# resume_flag RUN: `--resume` when the training run RUN has a checkpoint, nothing otherwise.
resume_flag() {
    if ls -d "$1"/step-* >/dev/null 2>&1; then echo --resume; fi
}

# student_base MODEL BASE: the model directory both DMD phases read, linked, never copied: the
# teacher as its DiT (Phase 1's initialisation, Phase 2's critic base) beside the text encoder and
# MODEL/vae-w8 as its codec: the width-8 codec the shipped student was trained with, the same
# encoder as MODEL/vae with the narrower decoder (scripts/world/train-vae.sh installs both).
# Phase 2 decodes every clip's clean prefix for its score tiles' image heads, 12 times a step;
# the narrower decoder cuts a step by 30 % (docs/BENCHMARKS.md, "Phase 2 of the default model
# and the wider decoder").
student_base() {
    local model=$1 base=$2
    mkdir -p "$base"
    ln -sfn "$(realpath "$model/teacher")" "$base/transformer"
    for d in text_encoder tokenizer; do ln -sfn "$(realpath "$model/$d")" "$base/$d"; done
    ln -sfn "$(realpath "$model/vae-w8")" "$base/vae"
}

# install_student EXPORT MODEL: EXPORT (a `train dmd` run's transformer/) becomes
# MODEL/transformer/, replaced whole, never half-written.
install_student() {
    local export=$1 model=$2
    rm -rf "$model/transformer.tmp" "$model/transformer.old"
    cp -r "$export" "$model/transformer.tmp"
    [ -e "$model/transformer" ] && mv "$model/transformer" "$model/transformer.old"
    mv "$model/transformer.tmp" "$model/transformer"
    rm -rf "$model/transformer.old"
}
