# Sourced by scripts/train-world.sh and scripts/train-default.sh.
# stage NAME DONE-FILE COMMAND...: runs COMMAND unless DONE-FILE exists, printing its wall time.
stage() {
    local name=$1 done=$2; shift 2
    if [ -e "$done" ]; then echo "== $name: done ($done)"; return; fi
    echo "== $name"
    local start=$SECONDS
    "$@"
    echo "== $name: $((SECONDS - start)) s wall"
}
