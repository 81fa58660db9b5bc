#!/usr/bin/env bash
# The proving engine on a GPU machine, from a cuzk bundle (`cargo xtask bundle`): its GPU
# tests, then `cuzk bench` rows through the engine. Usage: engine.sh BUNDLE tests|bench.
# Logs go to $OUT (or /tmp/engine-out); a short table is printed last.
set -u
B=${1:?bundle dir}
part=${2:?tests or bench}
out=${OUT:-/tmp/engine-out}
mkdir -p "$out"
rows=()
step() { # name, command...
    local name=$1; shift
    local t0=$(date +%s.%N)
    "$@" >"$out/$name.log" 2>&1
    local rc=$? t1=$(date +%s.%N)
    tail -n 40 "$out/$name.log"
    rows+=("$(awk -v n="$name" -v r="$rc" -v a="$t0" -v b="$t1" 'BEGIN{printf "%-34s rc=%-3s %6.1f s", n, r, b-a}')")
}
nvidia-smi -L
"$B/cuzk" devices
case "$part" in
tests)
    step staged "$B/tests/cuzk-groth16-gpu" --ignored gpu_staged_steps_match_cpu_and_return_the_budget --exact --nocapture
    step accept-2_26-16gib "$B/tests/cuzk-scheduler-gpu" --ignored gpu_engine_two_workers_three_jobs_in_16_gib --exact --nocapture
    step grid-2_24 "$B/tests/cuzk-scheduler-gpu" --ignored gpu_engine_grid_of_workers_jobs_and_caps --exact --nocapture
    ;;
bench)
    c="$B/cuzk --backend gpu bench --boolean-percent 75"
    step bench-24-w1c1 $c --log-constraints 24 --proofs 8 --workers 1 --concurrency 1
    step bench-24-w2c3 $c --log-constraints 24 --proofs 20 --workers 2 --concurrency 3
    step bench-26-w2c3 $c --log-constraints 26 --proofs 6 --workers 2 --concurrency 3
    step bench-26-w2c3-16gib env CUZK_VRAM_LIMIT=16GiB $c --log-constraints 26 --proofs 6 --workers 2 --concurrency 3
    ;;
esac
echo
echo "=== engine $part"
for r in "${rows[@]}"; do echo "$r"; done
grep -h -E 'proofs/s|GPU-bound|test result|^2\^' "$out"/*.log | tail -n 60
