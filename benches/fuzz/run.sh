#!/usr/bin/env bash
# Runs every fuzz target of benches/fuzz (src/bin/fuzz_<target>.rs) for SECONDS each (default
# 600) with its address space capped (ulimit -v), then prints one line per target: executions,
# panics, hangs/aborts, peak RSS, CPU time. Exit code 1 when any target crashed, hung or aborted.
#
#   benches/fuzz/run.sh [SECONDS] [TARGET...]        e.g.  benches/fuzz/run.sh 180 csv db
#
# Environment: FUZZ_MEM_KB (ulimit -v in KiB, default 4194304 = 4 GiB), FUZZ_SEED (RNG seed,
# default the driver's fixed one), FUZZ_OUT (results, default target/fuzz-results).
# Crashing inputs land in $FUZZ_OUT/<target>/crash-*.<ext>; replay one with
#   target/fuzz/fuzz_<target> --replay FILE
set -uo pipefail
cd "$(dirname "$0")/../.."

dur=${1:-600}
[ $# -gt 0 ] && shift
mem=${FUZZ_MEM_KB:-4194304}
results=${FUZZ_OUT:-target/fuzz-results}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in benches/fuzz/src/bin/fuzz_*.rs; do
        t=${f##*/fuzz_}
        targets+=("${t%.rs}")
    done
fi

cargo build --profile fuzz -p memscope-fuzz || exit 2

fixtures=../shared/fixtures/msmemscope
status=0
summary=()
echo "load before: $(uptime)"
for t in "${targets[@]}"; do
    out="$results/$t"
    rm -rf "$out"
    mkdir -p "$out"
    if [ -d /dev/shm ]; then work=$(mktemp -d /dev/shm/memscope-fuzz-$t.XXXXXX); else work="$out/work"; fi
    # SQLite's sort files and the reader's private copies go to TMPDIR: keep them on tmpfs too
    mkdir -p "$work/tmp"
    args=(--duration "$dur" --out "$out" --work "$work" --corpus "benches/fuzz/corpus/$t")
    [ -n "${FUZZ_SEED:-}" ] && args+=(--seed "$FUZZ_SEED")
    if [ "$t" = csv ] && [ -d "$fixtures" ]; then args+=(--corpus "$fixtures"); fi
    echo "== fuzz_$t: $dur s, ulimit -v $mem KiB"
    (
        ulimit -v "$mem"
        export TMPDIR="$work/tmp" SQLITE_TMPDIR="$work/tmp"
        exec /usr/bin/time -f "time: %M KiB max RSS, %e s wall, %U s user, %S s sys" \
            "target/fuzz/fuzz_$t" "${args[@]}"
    ) >"$out/stdout" 2>"$out/stderr"
    rc=$?
    line=$(grep "^fuzz_$t: .* executions in" "$out/stdout" | tail -1)
    tline=$(grep "^time: " "$out/stderr" | tail -1)
    case $rc in
        0) verdict="ok" ;;
        1) verdict="CRASHES (see $out/crash-*)"; status=1 ;;
        3) verdict="HANG (see $out/hang-*)"; status=1 ;;
        *)
            verdict="ABORTED rc=$rc (out of memory under ulimit -v?)"
            status=1
            for c in "$work"/current.*; do [ -e "$c" ] && cp "$c" "$out/abort-input.${c##*.}"; done
            ;;
    esac
    grep -E "CRASH|HANG" "$out/stderr" | head -5
    rm -rf "$work"
    summary+=("fuzz_$t: $verdict; ${line#fuzz_$t: }; ${tline#time: }")
done
echo "load after: $(uptime)"
printf '%s\n' "${summary[@]}"
exit $status
