#!/usr/bin/env bash
# Runs every GPU test and GPU bench of a cuzk bundle; prints a summary table last.
# Made by `cargo xtask bundle` (and used by `cargo xtask gpu-test`). Needs bash, grep, sort,
# comm and an NVIDIA GPU; no Rust toolchain.
#
# Layout next to this script:
#   tests/<bin>          test executables (libtest); GPU tests are #[ignore = "gpu"] fns named gpu_*
#   gpu-tests.txt        "<bin> <test name>" for every GPU test listed at build time
#   benches/<bin>        bench executables; benches.txt: "<bin> [args...]" one per line
#   cuzk                 the cuzk binary, if it was built (its `devices` report is printed first)
# Usage: run.sh [BIN ...]   with BIN names of tests/ (default: all, then the benches); naming
# binaries runs only those (no benches), so a suite longer than one session's call can be split.
# Exit status: 0 only if every listed GPU test ran and passed and every bench succeeded.
set -u
cd "$(dirname "$0")"
only=" $* "
for b in "$@"; do
    [ -x "tests/$b" ] || { echo "run.sh: no test binary tests/$b (have: $(ls tests | tr '\n' ' '))" >&2; exit 2; }
done
export CUZK_SYNC_LAUNCHES="${CUZK_SYNC_LAUNCHES:-0}"

if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; } && [ ! -e /dev/nvidia0 ]; then
    echo "run.sh: no NVIDIA GPU found (nvidia-smi -L lists none and /dev/nvidia0 is missing)" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L
if [ -x ./cuzk ]; then ./cuzk devices || echo "(cuzk devices failed: $?)"; fi

mkdir -p logs
rows=()
bad=0
total_listed=0
total_passed=0
for t in tests/*; do
    [ -x "$t" ] || continue
    bin=$(basename "$t")
    [ "$only" = "  " ] || [[ "$only" == *" $bin "* ]] || continue
    expected=$(grep "^$bin " gpu-tests.txt 2>/dev/null | cut -d' ' -f2- | sort)
    [ -n "$expected" ] || continue
    n_expected=$(printf '%s\n' "$expected" | grep -c .)
    total_listed=$((total_listed + n_expected))
    echo "=== $bin: $n_expected GPU tests"
    "$t" --ignored gpu_ --test-threads=1 --show-output >"logs/$bin.log" 2>&1
    rc=$?
    cat "logs/$bin.log"
    passed=$(grep -E '^test .* \.\.\. ok$' "logs/$bin.log" | sed -E 's/^test (.*) \.\.\. ok$/\1/' | sort)
    failed=$(grep -E '^test .* \.\.\. FAILED$' "logs/$bin.log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' | sort)
    ran=$(printf '%s\n%s\n' "$passed" "$failed" | grep . | sort)
    missing=$(comm -23 <(printf '%s\n' "$expected") <(printf '%s\n' "$ran") | grep . || true)
    n_passed=$(printf '%s\n' "$passed" | grep -c . || true)
    n_failed=$(printf '%s\n' "$failed" | grep -c . || true)
    n_missing=$(printf '%s\n' "$missing" | grep -c . || true)
    total_passed=$((total_passed + n_passed))
    status=ok
    if [ "$rc" -ne 0 ] || [ "$n_failed" -ne 0 ] || [ "$n_missing" -ne 0 ]; then
        status=FAIL
        bad=1
        [ -n "$missing" ] && echo "did not run: $missing"
    fi
    rows+=("$(printf '%-40s %6s %6s %6s %7s %5s  %s' "$bin" "$n_expected" "$(( n_passed + n_failed ))" "$n_passed" "$n_failed" "$rc" "$status")")
done

bench_rows=()
if [ -f benches.txt ] && [ "$only" = "  " ]; then
    while read -r bin args; do
        case "$bin" in ''|'#'*) continue ;; esac
        start=$(date +%s.%N)
        # shellcheck disable=SC2086
        if "benches/$bin" $args >"logs/bench-$bin.log" 2>&1; then status=ok; else status=FAIL; bad=1; fi
        cat "logs/bench-$bin.log"
        secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
        bench_rows+=("$(printf '%-40s %8ss  %s' "$bin" "$secs" "$status")")
    done < benches.txt
fi

if [ "$total_listed" -eq 0 ]; then
    echo "run.sh: no GPU tests listed in gpu-tests.txt" >&2
    bad=1
fi
echo
echo "==================== cuzk GPU summary ===================="
printf '%-40s %6s %6s %6s %7s %5s  %s\n' "test binary" "listed" "ran" "passed" "failed" "rc" "status"
for r in "${rows[@]}"; do echo "$r"; done
if [ "${#bench_rows[@]}" -gt 0 ]; then
    printf '\n%-40s %9s  %s\n' "bench" "time" "status"
    for r in "${bench_rows[@]}"; do echo "$r"; done
fi
echo "total: $total_passed/$total_listed GPU tests passed"
if [ "$bad" -eq 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
exit "$bad"
