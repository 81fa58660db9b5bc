#!/usr/bin/env bash
# Headline rows of two builds in one call, alternated: the GPU bench executables and the
# engine's `cuzk bench` rows, from BEFORE (a dir with `cuzk` and `benches/`, built from an older
# commit with `CUZK_CUDA_ARCHS=sm_90`) and AFTER (a bundle). Every bench checks its results
# against the CPU reference (proofs: the verifier) before timing.
# Usage: before_after.sh BEFORE AFTER [rounds]. Logs go to $OUT (or /tmp/before-after-out);
# a short table is printed last.
set -u
before=${1:?before dir}
after=${2:?after bundle dir}
rounds=${3:-1}
out=${OUT:-/tmp/before-after-out}
mkdir -p "$out"
rows=()
step() { # name, command...
    local name=$1; shift
    local t0=$(date +%s.%N)
    "$@" >"$out/$name.log" 2>&1
    local rc=$? t1=$(date +%s.%N)
    tail -n 25 "$out/$name.log"
    rows+=("$(awk -v n="$name" -v r="$rc" -v a="$t0" -v b="$t1" 'BEGIN{printf "%-28s rc=%-3s %6.1f s", n, r, b-a}')")
}
nvidia-smi -L
"$after/cuzk" devices
E24="--backend gpu bench --log-constraints 24 --boolean-percent 75 --proofs 20 --concurrency 3"
E26="--backend gpu bench --log-constraints 26 --boolean-percent 75 --proofs 6 --concurrency 3 --workers 2"
for r in $(seq "$rounds"); do
    for side in before after; do
        d=$before; [ $side = after ] && d=$after
        for b in gpu_field gpu_ntt gpu_msm gpu_prove; do
            step "$side-$b-$r" "$d/benches/cuzk-benches-$b"
        done
        # shellcheck disable=SC2086
        step "$side-engine24-$r" "$d/cuzk" $E24
        # shellcheck disable=SC2086
        step "$side-engine26-$r" "$d/cuzk" $E26
    done
done
printf '%s\n' "${rows[@]}"
