"""``torch_npu.npu._sanitizer`` of the stand-in: the shape of PyTorch's CUDA Sanitizer (an
object whose ``dispatch.event_handler`` has ``_handle_kernel_launch``), recording each call and
answering with the errors a test asks for."""
import types

calls = []
enabled = []
answer = []


class NPUSanitizerErrors(Exception):
    def __init__(self, errors):
        super().__init__("%d error(s)" % len(errors))
        self.errors = errors


class _Handler:
    def _handle_kernel_launch(self, stream, read_only, read_write, outputs, operator,
                              tensor_aliases):
        calls.append((stream, sorted(read_only), sorted(read_write), sorted(outputs), operator,
                      {k: list(v) for k, v in sorted(tensor_aliases.items())}))
        return list(answer)


npu_sanitizer = types.SimpleNamespace(dispatch=types.SimpleNamespace(event_handler=_Handler()))


def enable_npu_sanitizer():
    enabled.append(True)
