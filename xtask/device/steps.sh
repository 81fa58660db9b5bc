# Sourced by the device scripts, which set `out` (and `B` for start_daemon).
# `step NAME COMMAND...` runs a command with its output in $out/NAME.log (and a peak-memory line
# when $out/NAME.hwm was written beside it), prints the log's last $STEP_TAIL lines (default
# 12; 0 for none) and adds a row to `rows`, which `print_rows` prints: the short table every
# script ends with.
rows=()
step() { # name, command...
    local name=$1; shift
    local t0=$(date +%s.%N)
    "$@" >"$out/$name.log" 2>&1
    local rc=$? t1=$(date +%s.%N)
    [ -s "$out/$name.hwm" ] && echo "peak host memory (VmHWM) $(cat "$out/$name.hwm")" >>"$out/$name.log"
    [ "${STEP_TAIL:-12}" -gt 0 ] && tail -n "${STEP_TAIL:-12}" "$out/$name.log"
    rows+=("$(awk -v n="$name" -v r="$rc" -v a="$t0" -v b="$t1" 'BEGIN{printf "%-34s rc=%-3s %7.1f s", n, r, b-a}')")
}
print_rows() {
    printf '%s\n' "${rows[@]}"
}
# `start_daemon LOG ARGS...`: `$B ARGS...` in the background, its output in LOG; waits until it
# listens (or exits) and leaves its pid in D.
start_daemon() { # log, args...
    local log=$1; shift
    $B "$@" >"$log" 2>&1 &
    D=$!
    for _ in $(seq 600); do
        grep -q "listening on" "$log" && break
        kill -0 $D 2>/dev/null || break
        sleep 0.5
    done
}
