"""``torch_npu.npu`` of the stand-in: streams, the current stream, and ``mstx``."""
import types

import mstx as _sim_mstx  # examples/sim-npu/python


class Stream:
    """A stream whose handle is ``npu_stream``, as torch_npu's."""

    def __init__(self, handle):
        self.npu_stream = handle


_current = Stream(7)


def current_stream():
    return _current


# torch_npu.npu.mstx.mark(message, stream=None): the msTX front end of the framework
mstx = types.SimpleNamespace(mark=_sim_mstx.mark)
