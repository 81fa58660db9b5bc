#!/usr/bin/env bash
# Full-size Filecoin proofs through a GPU daemon that makes its own keys (issue 39), from a
# cuzk bundle (`cargo xtask bundle`). The workloads are sparse (never sealed); the daemon runs
# with --filecoin-generate-keys, so each circuit's key is made on the GPU at its first proof
# and held there, and only its .vk is written, where filecoin-proofs' verifiers read it.
#   porep:  `bench-c2 --no-baseline`: a warm-up proof (compile, key), then PROOFS timed C2s of
#           one C1, IN_FLIGHT at a time, every proof checked by verify_seal; timeline SVG.
#   window: one WindowPoSt partition of 2349 sectors (SECTORS), proven twice (the first loads),
#           each checked by filecoin-proofs' verifier.
#   snap:   a SnapDeals update proven twice, then IN_FLIGHT at once when IN_FLIGHT > 1, each
#           checked likewise.
# The daemon's peak host memory (VmHWM) and the key lines of its log are printed last.
# (BACKEND=cpu SIZE=2KiB: a dry run without a GPU.) DAEMON_CONFIG: a daemon TOML to start it with
# (e.g. `witness_map_on_device = false` for a baseline). DAEMON_LOG: its log filter (default info).
# Usage: [SIZE=32GiB] [PROOFS=3] [IN_FLIGHT=3] [SECTORS=2349] sector.sh BUNDLE porep|window|snap
set -u
B=${1:?bundle dir}/cuzk
KIND=${2:?porep, window or snap}
SIZE=${SIZE:-32GiB}
out=${OUT:-/tmp/sector-out}
W=$(mktemp -d)
mkdir -p "$out"
export FIL_PROOFS_PARAMETER_CACHE=$W/params
STEP_TAIL=25
. "$(dirname "$0")/steps.sh"
start_daemon "$out/daemon-$KIND.log" --log ${DAEMON_LOG:-info} --backend ${BACKEND:-gpu} daemon --listen unix:$W/cuzk.sock \
    --param-dir $W --filecoin-generate-keys ${DAEMON_CONFIG:+--config $DAEMON_CONFIG}
S="--daemon unix:$W/cuzk.sock"
P="--param-dir $W/params"
case $KIND in
porep)
    step seal $B filecoin seal --seal-proof $SIZE --miner-id 1000 --sector-id 7 --sparse --c1 $W/c1.json
    step bench-c2 $B filecoin bench-c2 $S --c1 $W/c1.json --proofs ${PROOFS:-3} --in-flight ${IN_FLIGHT:-3} \
        --miner-id 1000 --sector-id 7 --no-baseline --timeline "$out/porep-$SIZE.svg" $P
    ;;
window)
    R=$(printf '11%.0s' $(seq 31))05
    PA="--post-proof StackedDrgWindow${SIZE}V1_2 --randomness $R --miner-id 1000"
    step post-vanilla $B filecoin post-vanilla --post-proof StackedDrgWindow${SIZE}V1_2 --miner-id 1000 \
        --sectors ${SECTORS:-2349} --randomness $R --sparse --vanilla $W/post.bin
    for k in 1 2; do
        step window-$k $B filecoin window-post $S --partition 0 --proof $W/wpost-$k.bin --vanilla $W/post.bin $PA
        step verify-window-$k $B filecoin verify window-post --proof $W/wpost-$k.bin --vanilla $W/post.bin $PA $P
    done
    ;;
snap)
    step snap-vanilla sh -c "$B filecoin snap-vanilla --seal-proof $SIZE --sparse --vanilla $W/snap.bin > $W/snap.txt"
    c() { awk -v k="$1" '$1 == k {print $2}' $W/snap.txt; }
    SA="--seal-proof $SIZE --comm-r-old $(c comm_r_old) --comm-r-new $(c comm_r_new) --comm-d-new $(c comm_d_new)"
    for k in 1 2; do
        step snap-$k $B filecoin snap $S --vanilla $W/snap.bin --proof $W/snap-$k.bin $SA
        step verify-snap-$k $B filecoin verify snap --proof $W/snap-$k.bin $SA $P
    done
    # Sustained: IN_FLIGHT updates submitted at once; the step's time over IN_FLIGHT is the
    # time per update when the next one's synthesis overlaps this one's GPU work.
    n=${IN_FLIGHT:-1}
    if [ "$n" -gt 1 ]; then
        snaps() {
            local pids=() rc=0
            for k in $(seq "$n"); do
                $B filecoin snap $S --vanilla $W/snap.bin --proof $W/snap-in-flight-$k.bin $SA &
                pids+=($!)
            done
            for p in "${pids[@]}"; do wait "$p" || rc=1; done
            return $rc
        }
        step snap-$n-in-flight snaps
        for k in $(seq "$n"); do
            step verify-snap-in-flight-$k $B filecoin verify snap --proof $W/snap-in-flight-$k.bin $SA $P
        done
    fi
    ;;
*) echo "unknown kind $KIND"; exit 2 ;;
esac
hwm=$(awk '/VmHWM/ {printf "%.1f GiB", $2/1048576}' /proc/$D/status 2>/dev/null)
kill -TERM $D
wait $D
echo "daemon exit $?"
grep -E "key made|key loaded|circuit loaded|workers admitted|taken by another|after shutdown|failed" "$out/daemon-$KIND.log" | cut -c1-300 | tail -n 12
rm -rf "$W"
print_rows
echo "daemon peak host memory (VmHWM): $hwm"
