#!/usr/bin/env bash
# aarch64 in CI (issue 26): builds the probe, the sim-npu stand-ins and the collector for
# aarch64-unknown-linux-gnu in the Debian chroot of .ci/aarch64-env.sh, runs the probe's and the
# adapters' unit tests under qemu-aarch64, then a representative set of this workspace's
# end-to-end tests with aarch64 jobs (run by qemu through binfmt_misc): traced by this
# machine's x86_64 collector, then by the aarch64 collector (itself under qemu).
#
# Run from the repository root after `cargo build --workspace` and `cargo test --workspace
# --no-run` (the x86_64 test binaries it runs). Prints `aarch64: N passed, 0 failed`.
set -euo pipefail
cd "$(dirname "$0")/.."
T=aarch64-unknown-linux-gnu
env_sh=.ci/aarch64-env.sh
start=$SECONDS

# 1. Cross builds (the target folder is cached outside the clone).
$env_sh run cargo build --locked --target $T -p memscope-probe -p sim-npu -p memscope-cli
# 2. Unit tests of the probe side under qemu (runtime: unwinder, CFI, module map, on_stack;
#    the adapters the probe links).
$env_sh run cargo test --locked --target $T -p memscope-runtime -p memscope-adapter-host \
    -p memscope-adapter-atb -p memscope-adapter-hal -p memscope-adapter-mstx -p memscope-adapter-acl
echo "aarch64: builds and unit tests took $((SECONDS - start)) s"

# 3. End-to-end: the x86_64 test binaries of this build, their jobs built for aarch64.
# The test executables of the workspace build (`cargo test --workspace`, as .ci/run ran it: the
# same features, so nothing is rebuilt), by test target name.
exes=$(cargo test --workspace --locked --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])')
tests_of() { # the test executable of tests/tests/$1.rs
    awk -v n="$1" '$1 == n {print $2; exit}' <<<"$exes"
}
# test binary : the tests it runs, all when none are named (the rest of host.rs and mstx.rs
# run Python jobs, and this chroot has no aarch64 Python, or — host.rs's 1.6 M-event one — take
# minutes under emulation; call_stacks.rs and the Python tests run Python jobs)
SETS=(
    "host:leak_of_three_blocks_is_reported_with_counts_bytes_and_functions sigkill_loses_nothing_already_recorded fork_and_exec_children_get_their_own_dumps exit_underscore_loses_nothing every_alignment_function_is_recorded realloc_chains_and_glibc_edge_cases"
    "mstx:one_mstx_row_per_mark_and_range_edge_with_pid_and_tid sigkill_of_the_job_loses_no_mark_it_had_reported marks_from_eight_threads_are_all_recorded_with_their_thread_ids"
    "pools:"
    "probe_footprint:"
)
job_dir=/build/target/$T/debug
passed=0
failed=0
for collector in x86_64 aarch64; do
    for set in "${SETS[@]}"; do
        bin=${set%%:*}
        names=${set#*:}
        exe=$(tests_of "$bin")
        [ -n "$exe" ] || { echo "aarch64: no test binary for $bin" >&2; exit 1; }
        if [ "$collector" = x86_64 ]; then
            memscope=$PWD/target/debug/memscope
        else
            memscope=$job_dir/memscope
        fi
        filter=()
        [ -n "$names" ] && filter=($names --exact)
        log=target/aarch64-$collector-$bin${names:+-$(echo "$names" | cksum | cut -c1-6)}.log
        if $env_sh run env MEMSCOPE_TEST_JOB_DIR=$job_dir MEMSCOPE_TEST_MEMSCOPE="$memscope" \
            MEMSCOPE_PROBE_PATH=$job_dir/libmemscope_probe.so \
            MEMSCOPE_TEST_CC=aarch64-linux-gnu-gcc MEMSCOPE_TEST_CXX=aarch64-linux-gnu-g++ \
            "$exe" --test-threads=1 "${filter[@]}" >"$log" 2>&1; then
            passed=$((passed + 1))
            grep -E '^test result' "$log" | sed "s/^/aarch64 $collector collector, $bin: /"
        else
            failed=$((failed + 1))
            echo "aarch64 $collector collector, $bin: FAILED" >&2
            tail -n 60 "$log" >&2
        fi
    done
done
# 4. The aarch64 wheel: linked against glibc 2.17 by zig, tagged manylinux_2_17_aarch64,
#    checked by the wheel test (its ELF files read by the aarch64 binutils).
#    (A target folder of its own: zig's linker flags would make the builds above rebuild.)
wheel=$($env_sh run env CARGO_TARGET_DIR=/build/wheel-target \
    python/build-wheel.sh --glibc 2.17 --target $T | tail -n 1)
wheel_exe=$(tests_of wheel)
log=target/aarch64-wheel.log
if $env_sh run env MEMSCOPE_TEST_WHEEL="$wheel" MEMSCOPE_TEST_WHEEL_ARCH=aarch64 \
    MEMSCOPE_TEST_OBJDUMP=aarch64-linux-gnu-objdump "$wheel_exe" --exact \
    the_wheel_is_manylinux2014_stripped_ships_every_library_and_needs_glibc_2_17_at_most >"$log" 2>&1; then
    passed=$((passed + 1))
    grep -E '^test result' "$log" | sed "s/^/aarch64 wheel $(basename "$wheel"): /"
else
    failed=$((failed + 1))
    echo "aarch64 wheel: FAILED" >&2
    tail -n 60 "$log" >&2
fi
echo "aarch64: took $((SECONDS - start)) s"
echo "aarch64: $passed passed, $failed failed"
[ "$failed" = 0 ]
