#!/usr/bin/env bash
# The daemon and the reliability suite on a GPU machine, from a cuzk bundle (`cargo xtask
# bundle`). Usage: service.sh BUNDLE PART... with the parts below. Logs go to $OUT (or
# /tmp/service-out); key files go to $CUZK_PARAMS (default /tmp/cuzk-params); a short table is
# printed last. READ_AHEAD sets the daemon's read_ahead (default 2); KEEP_KEYS=1 keeps the
# overhead parts' 2^24 key for a next run.
#   daemon:      the daemon's overhead at 2^24 (in-process engine vs the daemon, witness by path
#                and streamed), then the 16 GiB scenario at 2^26: 2 workers, a preloaded key,
#                bench-daemon --concurrency 3 --proofs 5 with its timeline SVG, and the
#                daemon's memory before and after.
#   overhead:    throughput at 2^24, 2 workers x 3 in flight: in process (witness in memory,
#                and by path), then through the daemon (witness by path, and streamed), with Status/Metrics latency under load;
#                overhead-daemon: the daemon half alone.
#   upload:      issue 20's streamed upload at 2^24 alone (one worker, six `cuzk submit`s).
#   probe:       Status and GET /metrics answer times at 2^24, 2 workers x 3 in flight, from
#                processes of their own (probe.py, beside two controls without the daemon):
#                idle, while witnesses stream, and with witnesses by path; then 3 uploads.
#   faults:      a failure at every driver call of one proof and of one engine job.
#   memory:      another process takes device memory while the engine proves (2^24).
#   soak:        1000 proofs at 2^20 through one daemon (priorities, cancels, bad requests).
#   grid, grid26: the OOM grid at 2^24, and its 16 GiB row at 2^26 (two tests: 1 and 2
#                workers, then 4; run `grid26` alone in a call).
#   crash:       kill -9 of a GPU daemon during a proof at 2^22, then a restart.
#   queue:       PostgreSQL queue mode: direct submits vs the queue at 2^24, then two
#                half-device GPU daemons and a CPU one on one queue (PG_BINDIR or pg_config;
#                pack-postgres.sh carries a server to a machine without one).
# `cargo xtask reliability --gpu $OUT` writes RELIABILITY.md's GPU rows from these logs.
set -u
# For a dry run of the scripts on a machine without a GPU: BACKEND=cpu, CRASH_LOG=14, QLOG=12,
# SLOG=10, PLOG=12.
BACKEND=${BACKEND:-gpu}
HERE=$(cd "$(dirname "$0")" && pwd)
CRASH_LOG=${CRASH_LOG:-22}
PLOG=${PLOG:-24}
B=$(cd "${1:?bundle dir}" && pwd)
shift
out=${OUT:-/tmp/service-out}
mkdir -p "$out"
P=${CUZK_PARAMS:-/tmp/cuzk-params}
mkdir -p "$P"
rows=()
step() { # name, command...
    local name=$1
    shift
    local t0 t1 rc
    t0=$(date +%s.%N)
    # started/gpu/exit/seconds: what `cargo xtask reliability --gpu DIR` reads besides the output.
    echo "started: $(date -u '+%Y-%m-%d %H:%M UTC')" >"$out/$name.log"
    echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)" >>"$out/$name.log"
    "$@" >>"$out/$name.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    printf 'exit: %s\nseconds: %.1f\n' "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" >>"$out/$name.log"
    tail -n 25 "$out/$name.log"
    rows+=("$(awk -v n="$name" -v r="$rc" -v a="$t0" -v b="$t1" 'BEGIN{printf "%-30s rc=%-3s %7.1f s", n, r, b-a}')")
}
cuzk() { "$B/cuzk" "$@"; }

# A circuit of 2^$1 constraints (75% boolean), its witness and keys in $P as k$1.*.
make_key() {
    [ -f "$P/k$1.pk" ] && return 0
    cuzk circuit --log-constraints "$1" --boolean-percent 75 --r1cs "$P/k$1.r1cs" --witness "$P/k$1.wit" &&
        cuzk --backend "$BACKEND" setup --r1cs "$P/k$1.r1cs" --pk "$P/k$1.pk" --vk "$P/k$1.vk"
}

# Starts a daemon serving key k$1 with $2 workers (extra environment after); waits for it.
# NAME names it (socket $P/NAME.sock; log daemon-$1.log, or NAME-$1.log; default d), DBACKEND
# overrides its backend, and QUEUE (a PostgreSQL URL) makes it a queue host named NAME.
declare -A PIDS
start_daemon() {
    local log=$1 workers=$2 name=${NAME:-d}
    shift 2
    local dlog="$out/daemon-$log.log"
    [ "$name" = d ] || dlog="$out/$name-$log.log"
    local http=""
    [ -n "${HTTP_PORT:-}" ] && http="http_listen = \"127.0.0.1:$HTTP_PORT\""
    # No rm of an old socket: the daemon removes a stale one itself (the crash part checks it).
    cat >"$P/$name.toml" <<EOF
listen = "unix:$P/$name.sock"
param_dir = "$P"
backend = "${DBACKEND:-$BACKEND}"
workers_per_device = $workers
read_ahead = ${READ_AHEAD:-2}
$http
[[keys]]
id = "k$log"
pk = "k$log.pk"
r1cs = "k$log.r1cs"
trusted = true
EOF
    [ -n "${QUEUE:-}" ] && printf '[queue]\nurl = "%s"\nhost = "%s"\npoll_ms = 50\nprefetch = %s\n' "$QUEUE" "$name" "${PREFETCH:-2}" >>"$P/$name.toml"
    env "$@" "$B/cuzk" --log info daemon --config "$P/$name.toml" >"$dlog" 2>&1 &
    DAEMON=$!
    PIDS[$name]=$DAEMON
    for _ in $(seq 600); do
        cuzk status --daemon "unix:$P/$name.sock" 2>/dev/null | grep -q "k$log" && return 0
        kill -0 $DAEMON 2>/dev/null || break
        sleep 1
    done
    echo "daemon $name did not come up"
    tail -n 20 "$dlog"
    return 1
}
stop_daemon() { # [NAME]: SIGTERM, then its exit status
    local name=${1:-d}
    kill -TERM "${PIDS[$name]}"
    wait "${PIDS[$name]}"
    echo "daemon $name exited $?"
}

# A throwaway PostgreSQL server for the queue part: initdb and pg_ctl from $PG_BINDIR (default
# `pg_config --bindir`; PG_LIBDIR for its libraries when carried), run as nobody when root, on
# a free port; its URL in PG_URL.
start_pg() {
    PG_BIN=${PG_BINDIR:-$(pg_config --bindir 2>/dev/null)}
    [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ] || { echo "no initdb/pg_ctl in '$PG_BIN': set PG_BINDIR"; return 1; }
    PG_DIR=$P/pg
    rm -rf "$PG_DIR" && mkdir -p "$PG_DIR"
    PG_AS=(env ${PG_LIBDIR:+LD_LIBRARY_PATH=$PG_LIBDIR})
    [ "$(id -u)" = 0 ] && { chown nobody "$PG_DIR"; PG_AS=(runuser -u nobody -- "${PG_AS[@]}"); }
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${PG_AS[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U cuzk --auth=trust -E UTF8 --no-sync || return 1
    printf "port = %s\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nmax_connections = 200\n" "$port" "$PG_DIR" >>"$PG_DIR/data/postgresql.conf"
    "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w start || { cat "$PG_DIR/server.log"; return 1; }
    PG_URL="postgres://cuzk@127.0.0.1:$port/postgres"
}
stop_pg() { "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop; }
sql() { env ${PG_LIBDIR:+LD_LIBRARY_PATH=$PG_LIBDIR} "$PG_BIN/psql" -At "$PG_URL" -c "$1"; }
D="--daemon unix:$P/d.sock"

# The streamed upload alone, $2 times for key k$1: `cuzk submit` prints each upload's rate,
# timed until the daemon has received, checksummed and decoded the whole witness; --wait keeps
# the next upload off the CPU time of the proof before it.
uploads() {
    local i
    for i in $(seq "$2"); do
        cuzk submit $D --key "k$1" --witness "$P/k$1.wit" --wait --proof "$P/upload.proof" >/dev/null || return 1
    done
}

# kill -9 of a GPU daemon while it proves key k$1, then a restart on the same socket: the stale
# socket is removed, the whole device budget is there (nothing held by the dead process), and a
# proof verifies.
crash_restart() {
    local log=$1 st i
    local in_phase='import json, sys; s = json.load(sys.stdin); sys.exit(0 if s["running"] and any(w["phase"] for w in s["devices"][0]["workers"]) else 1)'
    start_daemon "$log" 1 || return 1
    for i in 1 2 3 4 5 6; do cuzk submit $D --key "k$log" --witness "$P/k$log.wit" >/dev/null || return 1; done
    for i in $(seq 500); do
        st=$(cuzk status $D --json) || return 1
        echo "$st" | python3 -c "$in_phase" && break
        sleep 0.01
    done
    echo "$st" | python3 -c "$in_phase" || { echo "no proof in a phase: $st"; return 1; }
    echo "$st" | python3 -c 'import json, sys; s = json.load(sys.stdin); print("kill -9 while", s["running"], "running, phases", [w["phase"] for w in s["devices"][0]["workers"]], "completed", s["completed"])'
    kill -KILL $DAEMON
    wait $DAEMON 2>/dev/null
    [ -S "$P/d.sock" ] || { echo "the killed daemon left no socket"; return 1; }
    local t0=$(date +%s.%N)
    start_daemon "$log" 1 || return 1
    local took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')
    grep -q "removing a stale socket" "$out/daemon-$log.log" || { echo "stale socket not removed"; return 1; }
    cuzk submit $D --key "k$log" --witness "$P/k$log.wit" --wait --proof "$P/crash.proof" --public-out "$P/crash.pub" || return 1
    cuzk verify --vk "$P/k$log.vk" --proof "$P/crash.proof" --public "$P/crash.pub" || return 1
    cuzk status $D --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["devices"][0]
assert d["budget_limit"] == d["budget_total"], d
print("device budget after restart: %d of %d B usable" % (d["budget_limit"], d["budget_total"]))' || return 1
    stop_daemon
    printf 'reliability: gpu-crash-restart log=%s kills=1 restart_s=%.1f stale_socket_removed=true full_budget=true proofs_after=1 verified=1\n' "$log" "$took"
}

nvidia-smi -L
df -h /tmp | tail -1
free -g | head -2
for part in "$@"; do
    case "$part" in
    daemon)
        step key-24 make_key 24
        c="$B/cuzk --backend gpu bench --boolean-percent 75 --log-constraints 24"
        step engine-24-w1c1 $c --proofs 10 --workers 1 --concurrency 1
        start_daemon 24 1 && {
            step daemon-24-path cuzk bench-daemon $D --key k24 --witness "$P/k24.wit" --by-path --vk "$P/k24.vk" --concurrency 1 --proofs 10
            step daemon-24-stream cuzk bench-daemon $D --key k24 --witness "$P/k24.wit" --vk "$P/k24.vk" --concurrency 1 --proofs 10
            step daemon-24-submit bash -c "time $B/cuzk submit $D --key k24 --witness $P/k24.wit"
            stop_daemon
        }
        rm -f "$P"/k24.*
        step key-26 make_key 26
        start_daemon 26 2 CUZK_VRAM_LIMIT=16GiB && {
            step status-idle cuzk status $D
            step daemon-26-16gib cuzk bench-daemon $D --key k26 --witness "$P/k26.wit" --vk "$P/k26.vk" --concurrency 3 --proofs 5 --timeline "$out/daemon-26-16gib.svg" --json "$out/daemon-26-16gib.json"
            step status-after cuzk status $D
            stop_daemon
        }
        rm -f "$P"/k26.*
        ;;
    overhead | overhead-daemon)
        step key-24 make_key 24
        c="$B/cuzk --backend gpu bench --boolean-percent 75 --log-constraints 24"
        [ "$part" = overhead ] && {
            step engine-24-w2c3 $c --proofs 20 --workers 2 --concurrency 3
            step engine-24-w2c3-path $c --proofs 20 --workers 2 --concurrency 3 --by-path
        }
        start_daemon 24 2 && {
            bd="cuzk bench-daemon $D --key k24 --witness $P/k24.wit --vk $P/k24.vk"
            step daemon-24-warm $bd --by-path --concurrency 3 --proofs 4
            # 40 proofs: ~150 Status calls in each, so a p99 is not just the slowest call.
            step daemon-24-path-c3 $bd --by-path --concurrency 3 --proofs 40
            step daemon-24-stream-c3 $bd --concurrency 3 --proofs 40
            step daemon-24-path-c1 $bd --by-path --concurrency 1 --proofs 5
            step daemon-24-upload uploads 24 3
            stop_daemon
        }
        [ -n "${KEEP_KEYS:-}" ] || rm -f "$P"/k24.*
        ;;
    probe)
        step "key-$PLOG" make_key "$PLOG"
        HTTP_PORT=9829 start_daemon "$PLOG" 2 && {
            bd="cuzk bench-daemon $D --key k$PLOG --witness $P/k$PLOG.wit --vk $P/k$PLOG.vk --concurrency 3"
            step daemon-$PLOG-warm $bd --by-path --proofs 4
            step probe-idle python3 "$HERE/probe.py" "$P/d.sock" 9829 5 probe-idle
            for how in stream path; do
                # 60 proofs take 20-25 s: the probes' 15 s start 2 s in and end before them.
                (sleep 2 && python3 "$HERE/probe.py" "$P/d.sock" 9829 15 "probe-$how" >"$out/probe-$how.out" 2>&1) &
                step "daemon-$PLOG-$how-probed" $bd $([ $how = path ] && echo --by-path) --proofs 60
                wait $!
                cat "$out/probe-$how.out"
            done
            step "daemon-$PLOG-upload" uploads "$PLOG" 3
            stop_daemon
        }
        [ -n "${KEEP_KEYS:-}" ] || rm -f "$P"/k"$PLOG".*
        ;;
    upload)
        step key-24 make_key 24
        start_daemon 24 1 && {
            step daemon-24-upload uploads 24 6
            stop_daemon
        }
        [ -n "${KEEP_KEYS:-}" ] || rm -f "$P"/k24.*
        ;;
    faults)
        step sites-proof "$B/tests/cuzk-groth16-gpu_sites" --ignored --exact gpu_a_failure_at_every_driver_call_of_a_proof_fails_it_alone --nocapture
        step sites-job "$B/tests/cuzk-scheduler-gpu_sites" --ignored --exact gpu_a_failure_at_every_driver_call_of_a_job_fails_it_alone --nocapture
        ;;
    memory)
        step memory-taken "$B/tests/cuzk-scheduler-gpu" --ignored --exact gpu_memory_taken_by_another_process --nocapture
        ;;
    soak)
        step soak-20 "$B/tests/cuzk-daemon-it" --ignored --exact gpu_soak::gpu_daemon_soak_1000_proofs --nocapture
        ;;
    grid)
        step oom-grid-24 "$B/tests/cuzk-scheduler-gpu" --ignored --exact gpu_reliability_oom_grid --nocapture
        ;;
    grid26)
        step oom-grid-26-16gib-w12 "$B/tests/cuzk-scheduler-gpu" --ignored --exact gpu_reliability_oom_grid_16_gib_2_26_workers_1_2 --nocapture
        step oom-grid-26-16gib-w4 "$B/tests/cuzk-scheduler-gpu" --ignored --exact gpu_reliability_oom_grid_16_gib_2_26_workers_4 --nocapture
        ;;
    crash)
        step "key-$CRASH_LOG" make_key "$CRASH_LOG"
        step crash-gpu crash_restart "$CRASH_LOG"
        rm -f "$P"/k"$CRASH_LOG".*
        ;;
    queue)
        # Issue 22 on one GPU: direct daemon submits against the same daemon's jobs through
        # the queue (2^QLOG), then two GPU daemons of half the device each and a CPU-only one
        # sharing one queue (2^SLOG): every job done once, every proof verified, none lost.
        QLOG=${QLOG:-24} SLOG=${SLOG:-20}
        step "key-$QLOG" make_key "$QLOG"
        step "key-$SLOG" make_key "$SLOG"
        step pg-start start_pg || continue
        # One host holds its workers plus `prefetch` jobs: 1, then 2 (the default).
        for pf in 1 2; do
            NAME=q0 QUEUE=$PG_URL PREFETCH=$pf start_daemon "$QLOG" 2 && {
                bd="cuzk bench-daemon --daemon unix:$P/q0.sock --key k$QLOG --witness $P/k$QLOG.wit --vk $P/k$QLOG.vk --by-path"
                bq="cuzk bench --queue $PG_URL --key k$QLOG --witness $P/k$QLOG.wit --vk $P/k$QLOG.vk"
                step "queue-warm-p$pf" $bd --concurrency 4 --proofs 4
                step "queue-direct-$QLOG-p$pf" $bd --concurrency 8 --proofs 24
                step "queue-queued-$QLOG-p$pf" $bq --concurrency 8 --proofs 24
                step "queue-stop-q0-p$pf" stop_daemon q0
            }
        done
        half=$(($(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null || echo 4096) / 2))
        NAME=g0 QUEUE=$PG_URL start_daemon "$SLOG" 2 CUZK_VRAM_LIMIT=${half}MiB &&
            NAME=g1 QUEUE=$PG_URL start_daemon "$SLOG" 2 CUZK_VRAM_LIMIT=${half}MiB &&
            NAME=c0 DBACKEND=cpu QUEUE=$PG_URL start_daemon "$SLOG" 2 && {
            step "queue-shared-$SLOG" cuzk bench --queue "$PG_URL" --key "k$SLOG" --witness "$P/k$SLOG.wit" --vk "$P/k$SLOG.vk" --concurrency 16 --proofs 200
            step queue-status cuzk status --queue "$PG_URL"
        }
        for n in g0 g1 c0; do [ -n "${PIDS[$n]:-}" ] && step "queue-stop-$n" stop_daemon $n; done
        echo "queue: jobs=$(sql 'SELECT count(*) FROM cuzk_jobs') done=$(sql "SELECT count(*) FROM cuzk_jobs WHERE state = 'done'") claims=$(sql 'SELECT count(*) FROM cuzk_claims') claimed_once=$(sql 'SELECT count(*) FROM (SELECT job_id FROM cuzk_claims GROUP BY job_id HAVING count(*) = 1) c') by_host: $(sql "SELECT string_agg(done_by || '=' || n, ' ') FROM (SELECT done_by, count(*) n FROM cuzk_jobs WHERE key_id = 'k$SLOG' GROUP BY done_by ORDER BY done_by) h")" | tee "$out/queue-summary.log"
        step pg-stop stop_pg
        ;;
    *) echo "unknown part $part" ;;
    esac
done
echo
echo "=== service $*"
for r in "${rows[@]}"; do echo "$r"; done
grep -h -E '^queue:|^uploaded|proofs/s|proofs/min|p50|GPU busy|test result|^soak 2|^grid|sites|budget|pinned|real|driver calls|during the run|memory taken' "$out"/*.log | tail -n 80
