"""Tests with memory limits over the sim-npu stand-in (issue 24). Which fail is the point:
tests/tests/pytest_plugin.rs checks it."""
import pytest

MiB = 1 << 20
LEAKED = []
CACHE = {}
OTHER_CACHE = {}


@pytest.mark.limit_leaks("1 MiB")
def test_leaks_4_mib_per_call(caching):
    LEAKED.extend(caching.alloc(0, [4 * MiB]))  # the leak


@pytest.mark.limit_leaks("1 MiB")
def test_fixed_twin_frees_its_block(caching):
    blocks = caching.alloc(0, [4 * MiB])
    caching.free(blocks)


def fill(cache, caching):
    if "buf" not in cache:
        cache["buf"] = caching.alloc(0, [4 * MiB])  # filled once


@pytest.mark.limit_leaks("1 MiB", warmup=1)
def test_cache_filled_in_warmup_passes(caching):
    fill(CACHE, caching)


@pytest.mark.limit_leaks("1 MiB")
def test_cache_filled_in_the_test_fails(caching):
    fill(OTHER_CACHE, caching)


def test_unmarked_over_the_ini_default_fails(caching):
    blocks = caching.alloc(0, [32 * MiB])  # the peak
    caching.free(blocks)


@pytest.mark.limit_memory("64 MiB", device="npu:0")
def test_marker_overrides_the_ini_default(caching):
    blocks = caching.alloc(0, [32 * MiB])
    caching.free(blocks)


@pytest.mark.limit_memory(None)
def test_limit_lifted(caching):
    blocks = caching.alloc(0, [32 * MiB])
    caching.free(blocks)


def test_small_unmarked_passes(caching):
    caching.free(caching.alloc(0, [MiB]))


@pytest.mark.limit_memory("1 MiB", device="pymem")
def test_python_objects_over_the_limit():
    rows = [bytes(1000) for _ in range(4000)]  # Python objects
    assert len(rows) == 4000
