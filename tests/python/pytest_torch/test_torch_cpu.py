"""Memory limits of tests on real torch, CPU tensors (issue 24): tests/tests/pytest_plugin.rs
checks which fail."""
import pytest
import torch

KEPT = []


@pytest.mark.limit_leaks("1 MiB", device="cpu")
def test_keeps_a_4_mib_tensor():
    KEPT.append(torch.ones(1024, 1024))  # kept


@pytest.mark.limit_memory("4 MiB", device="cpu")
def test_16_mib_temporary_over_the_limit():
    x = torch.zeros(4 * 1024, 1024)  # the peak
    assert float(x.sum()) == 0.0


@pytest.mark.limit_memory("64 MiB", device="cpu")
@pytest.mark.limit_leaks("1 MiB", device="cpu")
def test_small_model_within_limits():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    out = model(torch.randn(32, 64))
    out.sum().backward()
