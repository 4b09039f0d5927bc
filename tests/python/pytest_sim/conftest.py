"""A caching allocator over the sim-npu stand-in (PTA pool blocks reported through msTX), as
a torch_npu job has one: the tests of test_sim.py allocate device memory through it."""
import os
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "examples", "sim-npu"))

import train  # noqa: E402  (the sim-npu job's building blocks)


@pytest.fixture(scope="session")
def caching():
    npu = train.Npu(train.find_sim_npu_dir())
    train.check(npu.aclInit(None), "aclInit")
    train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
    return train.CachingAllocator(npu, train.Counters(), "ptaCaching", train.CACHING_SEGMENT)
