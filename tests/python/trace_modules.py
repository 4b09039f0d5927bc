"""tracer.start()/stop() around nn.Module calls (fake torch on sys.path) and a known function.

Usage: python trace_modules.py FAKE_TORCH_DIR
"""
import sys
import threading

sys.path.insert(0, sys.argv[1])
import memscope  # noqa: E402
import torch  # noqa: E402


class Linear(torch.nn.Module):
    def forward(self, x):
        return x * 2


def known_function(n):
    return sum(range(n))


def in_thread():
    known_function(3)


memscope.config(events="alloc,free")
memscope.start()
memscope.tracer.start()
Linear()(3)
known_function(5)
t = threading.Thread(target=in_thread)
t.start()
t.join()
memscope.tracer.stop()
memscope.stop()
print("trace_modules: ok")
