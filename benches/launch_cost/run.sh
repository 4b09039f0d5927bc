#!/usr/bin/env bash
# What the race check (issue 36) costs the job: per operation on the job's thread, and the
# whole `memscope run` against the bare job, for the three things it records —
#   launch: aclrtLaunchKernel on a stream (KERNEL_LAUNCH with its stream),
#   mark:   a sanitizer-op: mark with three tensors on a stream (a custom operator's accesses),
#   sync:   aclrtRecordEvent + aclrtStreamWaitEvent (two SYSTEM rows; ns are per pair).
# Each is run REPEATS times three ways, interleaved:
#   bare    - no memscope;
#   off     - memscope run --adapters mstx,pta: the ACL hooks are there and only forward
#             (launches are not collected; the mark is still recorded in the mark mode);
#   races   - memscope run --adapters acl,mstx,pta --analysis races: every launch, stream
#             call and mark recorded, and checked online by the collector.
# Prints medians: ns per op (wall and the loop thread's CPU) and the whole run's wall time
# as a ratio to bare. The sim-npu calls do no device work, so the ratios are the worst case.
#
# Then a program of LAUNCHES custom operators on 4 streams with events, syncs and block reuse
# (gen_prog.py, run by tests/programs/race_prog.c): the whole `memscope run --analysis races`
# against the bare program, and `memscope analyze races` offline over its capture (wall time
# and peak memory), the "1 M-launch capture" figure.
#
# usage: benches/launch_cost/run.sh [ops] [repeats] [launches]
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-1000000}
REPEATS=${2:-5}
LAUNCHES=${3:-1000000}
cargo build --profile dist -q -p memscope-cli -p memscope-probe -p sim-npu
ROOT=$PWD
MS=$ROOT/target/dist/memscope
LIB=$ROOT/target/dist/sim-npu/lib64
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
cc -O2 -g -Wall -I examples/sim-npu/csrc -o "$BUILD/launch_loop" benches/launch_cost/launch_loop.c \
    -L"$LIB" -Wl,-rpath,"$LIB" -lascendcl -lascendcl_impl -lruntime -lascend_hal -lms_tools_ext
cc -O2 -g -Wall -I examples/sim-npu/csrc -o "$BUILD/race_prog" tests/programs/race_prog.c \
    -L"$LIB" -Wl,-rpath,"$LIB" -lascendcl -lascendcl_impl -lruntime -lascend_hal -lms_tools_ext

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# one run: prints "<ns wall> <ns cpu> <whole-run seconds>"
one() {
    local how=$1 mode=$2 out t0 t1
    rm -rf "$BUILD/out"
    t0=$(date +%s.%N)
    case $how in
    bare) out=$("$BUILD/launch_loop" "$N" "$mode") ;;
    off) out=$("$MS" run -q -o "$BUILD/out" --adapters mstx,pta -- "$BUILD/launch_loop" "$N" "$mode") ;;
    races) out=$("$MS" run -q -o "$BUILD/out" --adapters acl,mstx,pta --analysis races \
        -- "$BUILD/launch_loop" "$N" "$mode") ;;
    esac
    t1=$(date +%s.%N)
    echo "$(sed -n 's/^ns_per_op //p' <<<"$out") $(echo "$t1 - $t0" | bc -l)"
}

echo "ops per run: $N, $REPEATS runs each way, interleaved (medians)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPU(s)"
printf '%-7s %-6s %12s %12s %10s %8s\n' mode how "ns/op wall" "ns/op cpu" "run s" "x bare"
for mode in launch mark sync; do
    declare -A W C S
    for how in bare off races; do W[$how]="" C[$how]="" S[$how]=""; done
    for ((r = 0; r < REPEATS; r++)); do
        for how in bare off races; do
            read -r w c s < <(one "$how" "$mode")
            W[$how]+="$w "; C[$how]+="$c "; S[$how]+="$s "
        done
    done
    base=$(tr ' ' '\n' <<<"${S[bare]}" | grep . | median)
    for how in bare off races; do
        w=$(tr ' ' '\n' <<<"${W[$how]}" | grep . | median)
        c=$(tr ' ' '\n' <<<"${C[$how]}" | grep . | median)
        s=$(tr ' ' '\n' <<<"${S[$how]}" | grep . | median)
        printf '%-7s %-6s %12.1f %12.1f %10.3f %8.2f\n' "$mode" "$how" "$w" "$c" "$s" \
            "$(echo "$s / $base" | bc -l)"
    done
done
echo "load average after the loops: $(cut -d' ' -f1-3 /proc/loadavg)"

for kind in ordered racy; do
    python3 benches/launch_cost/gen_prog.py "$LAUNCHES" 36 "$kind" >"$BUILD/prog.txt"
    echo "program ($kind): $LAUNCHES launches on 4 streams ($(wc -l <"$BUILD/prog.txt") operations)"
    bare=() plain=() traced=()
    for ((r = 0; r < REPEATS; r++)); do
        t0=$(date +%s.%N); "$BUILD/race_prog" "$BUILD/prog.txt" >/dev/null; t1=$(date +%s.%N)
        bare+=("$(echo "$t1 - $t0" | bc -l)")
        rm -rf "$BUILD/run"
        t0=$(date +%s.%N)
        "$MS" run -q -o "$BUILD/run" -- "$BUILD/race_prog" "$BUILD/prog.txt" >/dev/null
        t1=$(date +%s.%N)
        plain+=("$(echo "$t1 - $t0" | bc -l)")
        rm -rf "$BUILD/run"
        t0=$(date +%s.%N)
        "$MS" run -q -o "$BUILD/run" --analysis races -- "$BUILD/race_prog" "$BUILD/prog.txt" >/dev/null
        t1=$(date +%s.%N)
        traced+=("$(echo "$t1 - $t0" | bc -l)")
    done
    b=$(printf '%s\n' "${bare[@]}" | median)
    p=$(printf '%s\n' "${plain[@]}" | median)
    t=$(printf '%s\n' "${traced[@]}" | median)
    printf '  whole run: bare %.3f s; memscope run %.3f s (%.2fx); with --analysis races %.3f s (%.2fx)\n' \
        "$b" "$p" "$(echo "$p / $b" | bc -l)" "$t" "$(echo "$t / $b" | bc -l)"
    cap=$(find "$BUILD/run" -name '*.mscap' | head -1)
    echo "  capture: $(stat -c %s "$cap") bytes"
    for ((r = 0; r < 3; r++)); do
        /usr/bin/time -f "  analyze races (capture): %e s wall, %U s user, %M KiB peak RSS" \
            "$MS" analyze races "$cap" 2>&1 >"$BUILD/races.txt" | tail -1
        /usr/bin/time -f "  analyze leaks (capture, the replay alone): %e s wall, %M KiB peak RSS" \
            "$MS" analyze leaks "$cap" 2>&1 >/dev/null | tail -1
    done
    echo "  findings: $(grep -m1 -E 'race\(s\) in|No unsynchronized' "$BUILD/races.txt")"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
