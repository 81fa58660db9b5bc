#!/usr/bin/env bash
# Issue 23's before/after check on a GPU machine: the headline bench rows of the tree before the
# re-layering (bc85475: `gpu_bench_*` tests in its test binaries, in OLD) and of a bundle of the
# tree now (its bench executables), interleaved in one call so both see the same machine.
# Usage: layout.sh BUNDLE OLD kernels|prove. OLD holds old-field, old-ntt-gpu, old-msm-gpu and
# old-groth16-gpu (`cargo test --release --no-run` of bc85475, CUZK_CUDA_ARCHS=sm_90, stripped).
# Logs go to $OUT (or /tmp/layout-out); the rows of both sides are printed last.
set -u
B=${1:?bundle dir}
O=${2:?old binaries dir}
part=${3:?kernels or prove}
out=${OUT:-/tmp/layout-out}
mkdir -p "$out"
steps=()
step() { # name, seconds, command...
    local name=$1 limit=$2; shift 2
    local t0=$(date +%s.%N)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$? t1=$(date +%s.%N)
    steps+=("$(awk -v n="$name" -v r="$rc" -v a="$t0" -v b="$t1" 'BEGIN{printf "%-14s rc=%-3s %6.1f s", n, r, b-a}')")
}
# An old bench: its test binary, one ignored test (a plain command, so `timeout` can run it).
old=(--ignored --exact --nocapture --test-threads=1)
nvidia-smi -L
case "$part" in
kernels)
    # The new benches check every size against the CPU first: 2^26-2^27 take minutes there.
    step old-field 120 "$O/old-field" "${old[@]}" gpu_bench_field_throughput
    step new-field 120 "$B/benches/cuzk-benches-gpu_field"
    step old-ntt 200 "$O/old-ntt-gpu" "${old[@]}" gpu_bench_ntt
    step new-ntt 400 "$B/benches/cuzk-benches-gpu_ntt"
    step old-msm 200 "$O/old-msm-gpu" "${old[@]}" gpu_bench_msm
    step new-msm 400 "$B/benches/cuzk-benches-gpu_msm"
    rows='^BENCH ff\.fp?2?_mul |^BENCH ff\.fr_mul |forward 2\^2[46] Natural->BitReversed|^H pipeline 2\^2[47] |G1 2\^2[046] random, resident|G2 2\^24 random, resident'
    ;;
prove)
    step old-prove 280 "$O/old-groth16-gpu" "${old[@]}" gpu_bench_prove
    step new-prove 280 "$B/benches/cuzk-benches-gpu_prove"
    rows='^2\^2[46] (realistic|full-width)'
    ;;
esac
echo
echo "=== layout $part: each side's rows (old = bc85475, new = the bundle)"
for f in "$out"/*.log; do
    echo "--- $(basename "$f" .log)"
    grep -E "$rows" "$f" | grep -v -E 'scratch freed|precomputed|sweep|split ' | head -n 12
done
echo
for s in "${steps[@]}"; do echo "$s"; done
