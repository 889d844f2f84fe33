#!/usr/bin/env bash
# Side-by-side CPU benchmark: `flashforward bench dit` / `bench vae` / `bench train` against PyTorch on the same
# cores, same shapes, f32, random weights. Prints one markdown table per benchmark (DiT chunk forward,
# Phase 1 training step, VAE decode) with Rust ÷ PyTorch per preset at each thread count (results: docs/BENCHMARKS.md, "CPU against PyTorch").
#
#   scripts/bench-cpu-vs-pytorch.sh
#
# Environment (all optional):
#   SELF_FORCING  a checkout or bare git dir of guandeh17/Self-Forcing (default: cloned with git into
#                 target/self-forcing at the commit of the causal fixtures' meta.json)
#   FF_FIXTURES   the fixtures folder, read for the causal fixtures' Self-Forcing commit (default: the
#                 repository's tests/fixtures); the Python scripts are the repository's scripts/fixtures
#   BENCH_VENV    the Python virtualenv, made with pip from PyPI when absent (default: target/bench-venv)
#   FLASHFORWARD  the binary (default: target/release/flashforward, built when absent)
#   DIT_PRESETS   bench dit presets (default: tiny,small)    THREADS  thread counts (default: "1 2")
#   TRAIN_PRESETS bench train presets: one Phase 1 packed SFT step, L = 21 (default: tiny,small)
#   VAE_PRESETS   bench vae presets (default: tiny; wan2.1 is 480p and slow: set VAE_LATENTS too)
#                 An empty DIT_PRESETS, TRAIN_PRESETS or VAE_PRESETS skips that table.
#   VAE_LATENTS   latent frames per VAE decode (default: 21)  ITERS    timed repetitions (default: 3)
#   PROFILE       1 (default when `perf` is installed): after the tables, the op-by-op profile of each
#                 side of the DiT and training rows at the last thread count and the first preset:
#                 torch.profiler's self CPU time per aten op, and `perf`'s samples per symbol of the Rust
#                 run (the whole process, with 4 × ITERS timed repetitions so that the setup of the
#                 random weights is a small part of it); 0 skips it
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIXTURES=${FF_FIXTURES:-$ROOT/tests/fixtures}
FIXTURE_SCRIPTS=$ROOT/scripts/fixtures
VENV=${BENCH_VENV:-$ROOT/target/bench-venv}
BIN=${FLASHFORWARD:-$ROOT/target/release/flashforward}
DIT_PRESETS=${DIT_PRESETS-tiny,small}
TRAIN_PRESETS=${TRAIN_PRESETS-tiny,small}
VAE_PRESETS=${VAE_PRESETS-tiny}
VAE_LATENTS=${VAE_LATENTS:-21}
THREADS=${THREADS:-1 2}
ITERS=${ITERS:-3}
PROFILE=${PROFILE:-$(command -v perf >/dev/null && echo 1 || echo 0)}

SF_COMMIT=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["self_forcing_commit"])' \
    "$FIXTURES/sf_causal_tiny/uniform/meta.json")
SF=${SELF_FORCING:-$ROOT/target/self-forcing}
. "$ROOT/scripts/fixtures/self-forcing.sh"

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    # The PyPI torch wheel pulls the CUDA libraries (≈ 5 GB installed); the CPU kernels are the same.
    "$VENV/bin/pip" install --quiet torch diffusers safetensors einops numpy
fi
PY=$VENV/bin/python

# Self-Forcing's model modules, extracted and patched for CPU SDPA by the fixtures' own script.
SFCODE=$ROOT/target/bench-sfcode
"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import make_causal_fixtures as m; m.prepare_sf(sys.argv[2], sys.argv[3])' \
    "$FIXTURE_SCRIPTS" "$SF" "$SFCODE"

[ -x "$BIN" ] || cargo build --release -p ff-cli --manifest-path "$ROOT/Cargo.toml"

json() { "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
ratio() { "$PY" -c 'import sys; print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")' "$1" "$2"; }
# Seconds column of the `bench dit` row of mode $1 (segments: the renderer's published chunks read in
# place; window: copied into a ring window) / of the `bench vae` row.
dit_seconds() { awk -F'|' -v mode="$1" '$3 ~ mode { gsub(/ /, "", $6); print $6 }'; }
vae_seconds() { awk -F'|' 'NR > 3 { gsub(/ /, "", $6); print $6 }'; }
# Seconds/step column of the `bench train` row of preset $1 (the table before the memory plan).
train_seconds() { awk -F'|' -v preset="$1" '{ p = $2; gsub(/ /, "", p) } p == preset { gsub(/ /, "", $6); print $6; exit }'; }

echo "Rust: $("$BIN" --version), backend: $("$BIN" bench dit --configs tiny --iters 1 --height 4 --width 4 --text-tokens 4 | sed -n '1s/.* on \(.*\) (F32).*/\1/p')"
echo "PyTorch: $("$PY" -c 'import torch; print(torch.__version__)'), $(nproc) cores"
if [ -n "$DIT_PRESETS" ]; then
echo
echo "bench dit: one renderer chunk forward (3 latent frames of 30×52 over 6 published chunks, 512 text tokens)"
echo "| preset | threads | Rust segments s | Rust window s | PyTorch plain s | Rust ÷ PyTorch |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for preset in ${DIT_PRESETS//,/ }; do
    for t in $THREADS; do
        torch=$("$PY" "$FIXTURE_SCRIPTS/bench_dit_torch.py" --sfcode "$SFCODE" --preset "$preset" --threads "$t" \
            --impl plain --iters "$ITERS" | json plain_seconds)
        table=$(RAYON_NUM_THREADS=$t "$BIN" bench dit --configs "$preset" --iters "$ITERS")
        seg=$(dit_seconds segments <<<"$table")
        win=$(dit_seconds window <<<"$table")
        best=$("$PY" -c 'import sys; print(min(map(float, sys.argv[1:])))' "$seg" "$win")
        printf '| %s | %s | %.4f | %.4f | %.4f | %s |\n' "$preset" "$t" "$seg" "$win" "$torch" "$(ratio "$best" "$torch")"
    done
done
fi
if [ -n "$TRAIN_PRESETS" ]; then
echo
echo "bench train: one Phase 1 packed SFT step (L = 21 → 35 frames of 8×8 latents, 32 text tokens, LoRA rank 16 of both roles + role vectors trained, AdamW)"
echo "| preset | threads | Rust s/step | PyTorch s/step | Rust ÷ PyTorch |"
echo "| --- | ---: | ---: | ---: | ---: |"
for preset in ${TRAIN_PRESETS//,/ }; do
    for t in $THREADS; do
        torch=$("$PY" "$ROOT/scripts/bench_train_torch.py" --sfcode "$SFCODE" --preset "$preset" --threads "$t" \
            --iters "$ITERS" | json seconds)
        rust=$(RAYON_NUM_THREADS=$t "$BIN" bench train --configs "$preset" --iters "$ITERS" | train_seconds "$preset")
        printf '| %s | %s | %.3f | %.3f | %s |\n' "$preset" "$t" "$rust" "$torch" "$(ratio "$rust" "$torch")"
    done
done
fi
if [ -n "$VAE_PRESETS" ]; then
echo
echo "bench vae: decode of $VAE_LATENTS latent frames (AutoencoderKLWan against WanVae)"
echo "| preset | threads | Rust s | PyTorch s | Rust ÷ PyTorch |"
echo "| --- | ---: | ---: | ---: | ---: |"
vae_iters=$([ "$VAE_PRESETS" = tiny ] && echo "$ITERS" || echo 0)
for preset in ${VAE_PRESETS//,/ }; do
    for t in $THREADS; do
        torch=$("$PY" "$ROOT/scripts/bench_vae_torch.py" --preset "$preset" --threads "$t" --latents "$VAE_LATENTS" \
            --iters "$vae_iters" | json seconds)
        rust=$(RAYON_NUM_THREADS=$t "$BIN" bench vae --configs "$preset" --latents "$VAE_LATENTS" --iters "$vae_iters" | vae_seconds)
        printf '| %s | %s | %.3f | %.3f | %s |\n' "$preset" "$t" "$rust" "$torch" "$(ratio "$rust" "$torch")"
    done
done
fi
if [ "$PROFILE" = 1 ]; then
t=${THREADS##* }
perf_top() {
    local data; data=$(mktemp)
    RAYON_NUM_THREADS=$t perf record -q -F 499 -o "$data" -- "$BIN" "$@" >/dev/null 2>&1
    echo '```'
    { perf report -i "$data" --no-children --sort symbol --stdio 2>/dev/null || true; } | grep -E '^ +[0-9]' | head -15 | cut -c1-120 || true
    echo '```'
    rm -f "$data"
}
torch_top() { echo '```'; { "$@" 2>&1 >/dev/null || true; } | grep -v -E 'USDT|ERROR|profiler_st' | head -16 || true; echo '```'; }
if [ -n "$DIT_PRESETS" ]; then
    preset=${DIT_PRESETS%%,*}
    echo
    echo "profile, bench dit $preset at $t threads: PyTorch (torch.profiler, self CPU time per op)"
    torch_top "$PY" "$ROOT/scripts/profile_dit_torch.py" --sfcode "$SFCODE" --preset "$preset" --threads "$t" --impl plain --iters "$ITERS"
    echo "Rust (perf, samples per symbol)"
    perf_top bench dit --configs "$preset" --iters $((4 * ITERS))
fi
if [ -n "$TRAIN_PRESETS" ]; then
    preset=${TRAIN_PRESETS%%,*}
    echo
    echo "profile, bench train $preset at $t threads: PyTorch (torch.profiler, self CPU time per op)"
    torch_top "$PY" "$ROOT/scripts/bench_train_torch.py" --sfcode "$SFCODE" --preset "$preset" --threads "$t" --iters "$ITERS" --profile
    echo "Rust (perf, samples per symbol)"
    perf_top bench train --configs "$preset" --iters $((4 * ITERS))
fi
fi
