#!/usr/bin/env bash
# Headline rows of two builds in one call, alternated: the GPU bench executables and the
# engine's `cuzk bench` rows, from BEFORE (a dir with `cuzk` and `benches/`, built from an older
# commit with `CUZK_CUDA_ARCHS=sm_90`) and AFTER (a bundle). Every bench checks its results
# against the CPU reference (proofs: the verifier) before timing.
# Usage: before_after.sh BEFORE AFTER [rounds] [benches]: benches (default "gpu_prove") are
# bench executables' names without `cuzk-benches-` (gpu_field gpu_ntt gpu_msm gpu_prove).
# Logs go to $OUT (or /tmp/before-after-out); the rows of both sides and a short table are
# printed last.
set -u
before=${1:?before dir}
after=${2:?after bundle dir}
rounds=${3:-1}
benches=${4:-gpu_prove}
out=${OUT:-/tmp/before-after-out}
mkdir -p "$out"
STEP_TAIL=0
. "$(dirname "$0")/steps.sh"
nvidia-smi -L
"$after/cuzk" devices
E24="--backend gpu bench --log-constraints 24 --boolean-percent 75 --proofs 20 --concurrency 3"
E26="--backend gpu bench --log-constraints 26 --boolean-percent 75 --proofs 6 --concurrency 3 --workers 2"
# Each row is measured on both sides in turn, so a cut call still has pairs.
run_pair() { # name, command relative to a side's dir...
    local name=$1; shift
    local exe=$1; shift
    for side in before after; do
        d=$before; [ $side = after ] && d=$after
        step "$name-$side-$r" timeout 300 "$d/$exe" "$@"
    done
}
for r in $(seq "$rounds"); do
    for b in $benches; do
        run_pair "$b" "benches/cuzk-benches-$b"
    done
    # shellcheck disable=SC2086
    run_pair engine24 cuzk $E24
    # shellcheck disable=SC2086
    run_pair engine26 cuzk $E26
done
echo
echo "=== rows of each side (before = $before, after = $after)"
for f in "$out"/*.log; do
    echo "--- $(basename "$f" .log)"
    grep -E '^BENCH ff\.fp?2?_mul |^BENCH ff\.fr_mul |forward 2\^2[46] Natural->BitReversed|^H pipeline 2\^2[47] |G1 2\^2[046] random, resident|G2 2\^24 random, resident|^2\^2[46] (realistic|full-width)|proofs/s|verified|GPU-bound' "$f" |
        grep -v -E 'scratch freed|precomputed|sweep|split ' | head -n 14
done
echo
print_rows
