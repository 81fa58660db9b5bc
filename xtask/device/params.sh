#!/usr/bin/env bash
# Issue #21's load targets on a GPU machine, from a cuzk bundle (`cargo xtask bundle`): the GPU
# subgroup-check tests, then `cuzk bench-params` at 2^24 (a 9.7 GB bellperson file: trusted
# loads by SHA-256, BLAKE2b and BLAKE3, and the fully checked load with the subgroup on the GPU).
# Usage: params.sh BUNDLE tests|bench [LOG_SIZE]. Logs go to $OUT (or /tmp/params-out).
set -u
B=${1:?bundle dir}
part=${2:?tests or bench}
k=${3:-24}
out=${OUT:-/tmp/params-out}
mkdir -p "$out"
nvidia-smi -L
nproc
case "$part" in
tests)
    "$B/tests/cuzk-groth16" --ignored gpu_subgroup_check_matches_cpu --nocapture 2>&1 | tee "$out/groth16.log" | tail -n 20
    "$B/tests/cuzk-formats-gpu_checks" --ignored gpu_full_checks_name_the_first_point_outside_the_subgroup --nocapture 2>&1 | tee "$out/formats.log" | tail -n 20
    grep -h 'test result' "$out"/groth16.log "$out"/formats.log
    ;;
bench)
    # The file goes to the disk (page cache); ~10 GB at 2^24, deleted afterwards.
    dir=${PARAMS_DIR:-/tmp}
    df -h "$dir" | tail -n 1
    free -g | head -n 2
    timeout 570 "$B/cuzk" bench-params --log-size "$k" --dir "$dir" --runs 2 2>&1 | tee "$out/bench-params-$k.log"
    ;;
esac
