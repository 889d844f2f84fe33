# Sourced by scripts/train-world.sh, scripts/train-default.sh and scripts/world/continue-*.sh.
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

# student_start MODEL RUNS: student_base MODEL RUNS/base, and the installed student copied to
# RUNS/start, the student a continuation starts from and is scored against (the install replaces
# MODEL/transformer/, which a resumed run still reads).
student_start() {
    local model=$1 runs=$2
    student_base "$model" "$runs/base"
    [ -e "$runs/start/flashforward.json" ] || { rm -rf "$runs/start"; cp -r "$model/transformer" "$runs/start"; }
}

# install_export EXPORT DEST: the folder EXPORT (a run's transformer/) becomes DEST (MODEL/transformer
# or MODEL/teacher), replaced whole, never half-written.
install_export() {
    local export=$1 dest=$2
    rm -rf "$dest.tmp" "$dest.old"
    cp -r "$export" "$dest.tmp"
    [ -e "$dest" ] && mv "$dest" "$dest.old"
    mv "$dest.tmp" "$dest"
    rm -rf "$dest.old"
}

# teacher_eval DIR PROMPTS TEACHER MODEL [flags...]: a teacher's 50-step guidance samples of
# PROMPTS held-out prompts at 5 s (scripts/world/eval.sh), with MODEL's codec and text encoder.
teacher_eval() {
    local dir=$1 prompts=$2 teacher=$3 model=$4; shift 4
    BIN="$BIN" NICE="$NICE" bash scripts/world/eval.sh "$dir" "$prompts" 5 \
        --dit "$teacher" --dit-config "$teacher/config.json" \
        --vae "$model/vae/diffusion_pytorch_model.safetensors" --vae-config "$model/vae/config.json" \
        --text-encoder "$model/text_encoder" --text-encoder-config "$model/text_encoder/config.json" \
        --tokenizer "$model/tokenizer/tokenizer.json" --schedule bidirectional "$@"
}

# paired_verdict BEFORE.json AFTER.json: two `eval --json` reports of the same prompts and seeds;
# prints "BEFORE-ACCURACY AFTER-ACCURACY DIFFERENCE STANDARD-ERROR VERDICT", the mean and standard
# error of the per-prompt differences after − before, and `better` when the mean exceeds two
# standard errors (`not-better` otherwise).
paired_verdict() {
    jq -s -r '. as $in | [.[0].per_video, .[1].per_video] | transpose | map(.[1].prompt_accuracy - .[0].prompt_accuracy) as $d
        | ($d | length) as $n | ($d | add / $n) as $m | ((($d | map((. - $m) * (. - $m)) | add) / ($n - 1) / $n) | sqrt) as $se
        | "\($in[0].prompt_accuracy) \($in[1].prompt_accuracy) \($m) \($se) \(if $m > 2 * $se then "better" else "not-better" end)"' \
        "$1" "$2"
}

# student_score RUNS NAME DIT: DIT (a student folder) on PROMPTS held-out prompts at 5 s with the shipped
# codec and text encoder (scripts/world/eval.sh), kept per prompt count as
# RUNS/eval-NAME/eval-PROMPTS.json (eval.sh reuses the videos of a smaller count in the folder).
student_score() {
    local runs=$1 name=$2 dit=$3
    BIN="$BIN" NICE="$NICE" scripts/world/eval.sh "$runs/eval-$name" "$PROMPTS" 5 --dit "$dit"
    cp "$runs/eval-$name/eval.json" "$runs/eval-$name/eval-$PROMPTS.json"
}

# install_if_better RUNS NAME FOLDER DEST: the paired verdict of RUNS/eval-start against
# RUNS/eval-NAME (both scored by `student_score`); FOLDER (the student NAME scored) replaces DEST only
# when it is better by two standard errors. Writes RUNS/verdict.txt.
install_if_better() {
    local runs=$1 name=$2 folder=$3 dest=$4 verdict before after diff se better
    verdict=$(paired_verdict "$runs/eval-start/eval-$PROMPTS.json" "$runs/eval-$name/eval-$PROMPTS.json")
    read -r before after diff se better <<< "$verdict"
    echo "prompt accuracy on $PROMPTS held-out prompts at 5 s: installed $before, $name $after (difference $diff, standard error $se)"
    if [ "$better" = better ]; then
        install_export "$folder" "$dest"
        echo "installed as $dest/"
    else
        echo "kept the installed student: $name is not better by two standard errors"
    fi
    echo "$PROMPTS $verdict" > "$runs/verdict.txt"
}
