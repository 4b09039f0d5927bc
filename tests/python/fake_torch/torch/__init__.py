"""A stand-in for the part of PyTorch the tracer recognises (tests only)."""
from . import nn  # noqa: F401
