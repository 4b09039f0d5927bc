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
$env_sh run cargo build --locked --target $T -p memscope-probe -p sim-npu -p memscope-cli \
    -p memscope-adapter-pymem
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
# take minutes under emulation — host.rs's 1.6 M-event one — or run Python jobs: those that
# matter are in PY_SETS below)
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
# 5. Python jobs on the aarch64 CPython of the chroot ($MEMSCOPE_A64_PYTHON, Debian's, under
#    qemu; .ci/aarch64-env.sh): the package from the source tree, traced by the x86_64 and by the
#    aarch64 collector (PY_SETS), then the aarch64 wheel of step 4 installed into fresh venvs,
#    its own aarch64 collector tracing (WHEEL_SETS), and the source tree and an sdist built by
#    an aarch64 pip (maturin under qemu driving this chroot's cargo for $T).
py_start=$SECONDS
$env_sh run sh -c '"$MEMSCOPE_A64_PYTHON" -c "import platform, sys
assert platform.machine() == \"aarch64\", platform.machine()
print(\"aarch64: Python\", platform.python_version(), \"on\", platform.machine(), sys.executable)"'
PY_SETS=(
    "demo:the_demo_leak_report_names_the_leaking_line_of_train_py"
    "python_stacks:c_and_python_call_stacks_give_both_columns python_stacks_are_cut_at_the_requested_depth"
    "pymem:pymem_summary_reports_the_kept_objects_live_at_exit_by_python_stack"
    "msmemscope_api:documented_leak_example_runs_after_load_api_env_and_under_msmemscope import_msmemscope_gives_msmemscopes_names_submodules_and_framework_hooks rows_recorded_before_stop_are_in_the_csv_and_db_when_it_returns_plain_preloaded_and_under_run"
    "python_cli:an_analyzer_called_right_after_stop_in_plain_python_reads_every_row_recorded"
)
WHEEL_SETS=(
    "python:wheel_installs_into_a_fresh_venv_and_both_ways_to_run_give_the_same_rows python_dash_m_memscope_runs_the_cli_and_analyzer_runs_the_rust_analyses plain_python_config_call_stack_python_puts_python_stacks_on_the_rows under_run::describer_exit_on_another_object_ends_the_innermost_level_of_that_owner wheel_installs::wheel_msmemscope_script_preloads_the_wheels_probe_for_import_msmemscope"
    "pytest_plugin:sim_npu_test_leaking_4_mib_per_call_fails_naming_its_line_and_its_fixed_twin_passes"
    "wheel:pip_installs_the_source_tree_and_an_sdist_into_fresh_venvs"
)
py_set() { # collector label, set, extra env...
    local label=$1 set=$2 bin names exe log
    shift 2
    bin=${set%%:*}
    names=${set#*:}
    exe=$(tests_of "$bin")
    [ -n "$exe" ] || { echo "aarch64: no test binary for $bin" >&2; exit 1; }
    log=target/aarch64-py-$label-$bin.log
    # shellcheck disable=SC2086 # test names are words
    if $env_sh run sh -c 'exec env MEMSCOPE_TEST_JOB_PYTHON="$MEMSCOPE_A64_PYTHON" "$@"' sh \
        env MEMSCOPE_TEST_JOB_DIR=$job_dir MEMSCOPE_PROBE_PATH=$job_dir/libmemscope_probe.so \
        MEMSCOPE_TEST_CC=aarch64-linux-gnu-gcc MEMSCOPE_TEST_CXX=aarch64-linux-gnu-g++ \
        "$@" "$exe" --test-threads=2 $names --exact >"$log" 2>&1; then
        passed=$((passed + 1))
        grep -E '^test result' "$log" | sed "s/^/aarch64 Python, $label, $bin: /"
    else
        failed=$((failed + 1))
        echo "aarch64 Python, $label, $bin: FAILED" >&2
        tail -n 60 "$log" >&2
    fi
}
for set in "${PY_SETS[@]}"; do
    py_set x86_64-collector "$set" MEMSCOPE_TEST_MEMSCOPE="$PWD/target/debug/memscope"
    py_set aarch64-collector "$set" MEMSCOPE_TEST_MEMSCOPE="$job_dir/memscope"
done
for set in "${WHEEL_SETS[@]}"; do
    py_set wheel "$set" MEMSCOPE_TEST_WHEEL="$wheel" CARGO_BUILD_TARGET=$T \
        MATURIN_PEP517_ARGS="--profile dev"
done
echo "aarch64: Python sets took $((SECONDS - py_start)) s"
echo "aarch64: took $((SECONDS - start)) s"
echo "aarch64: $passed passed, $failed failed"
[ "$failed" = 0 ]
