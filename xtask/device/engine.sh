#!/usr/bin/env bash
# The proving engine on a GPU machine, from a cuzk bundle (`cargo xtask bundle`): its GPU
# tests, then `cuzk bench` rows through the engine, and keys held on the device under a cap.
# Usage: engine.sh BUNDLE tests|bench|held.
# Logs go to $OUT (or /tmp/engine-out); a short table is printed last.
set -u
B=${1:?bundle dir}
part=${2:?tests or bench}
out=${OUT:-/tmp/engine-out}
mkdir -p "$out"
STEP_TAIL=40
. "$(dirname "$0")/steps.sh"
# Runs a command with its peak resident host memory polled into $out/NAME.hwm.
with_hwm() { # name, command...
    local name=$1; shift
    "$@" &
    local pid=$!
    while kill -0 $pid 2>/dev/null; do
        awk '/VmHWM/ {print $2/1048576 " GiB"}' /proc/$pid/status >"$out/$name.hwm.new" 2>/dev/null &&
            [ -s "$out/$name.hwm.new" ] && mv "$out/$name.hwm.new" "$out/$name.hwm"
        sleep 1
    done
    wait $pid
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
held)
    # A key made on the device and held there under a cap: the one-shot prover's test at
    # 2^16, then the engine at a 32 GiB PoRep partition's size under 16 GiB (every query
    # streamed from pinned host memory).
    step held-2_16 with_hwm held-2_16 "$B/tests/cuzk-groth16-setup_gpu" --ignored --exact \
        gpu_held_key_streams_what_the_cap_leaves_out_from_pinned_memory --nocapture
    step bench-27-16gib-held with_hwm bench-27-16gib-held env CUZK_VRAM_LIMIT=16GiB CUZK_PINNED_LIMIT=118GiB \
        "$B/cuzk" --backend gpu bench --log-constraints 27 --constraints 130000000 --boolean-percent 75 \
        --proofs 4 --workers 1 --concurrency 2 --key-on-device
    ;;
esac
echo
echo "=== engine $part"
print_rows
grep -h -E 'proofs/s|GPU-bound|test result|^2\^|^proof [0-9]|rows \(2|VmHWM' "$out"/*.log | tail -n 60
