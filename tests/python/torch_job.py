"""Real torch on CPU under memscope (issue 13): a small model's forward and backward (Aten op
launches, ACCESS rows, CPU tensors), and memory watch.

Usage:
  torch_job.py model                 Linear(4,3) -> ReLU -> Linear(3,2) on x of shape (2, 4),
                                     loss.backward()
  torch_job.py watch-api             memscope.watcher.watch(buf) then add, mul, fill_ (the op
                                     that overwrites buf), sum
  torch_job.py watch-cli             for --watch aten.add.Tensor,aten.sum.default: add, then
                                     mul_ on its output (the overwrite), then sum
  torch_job.py watch-addr SIM_DIR    watcher.watch(addr, length=...) of sim-npu device memory
                                     (dumped through aclrtMemcpy), overwritten by fill_
  torch_job.py watch-cpu             watcher.watch(addr, length=...) of CPU memory in a process
                                     without the ACL runtime, overwritten by fill_; then an
                                     address that is not memory of the process (ValueError)
"""

import ctypes
import os
import sys

import torch


def model_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    x = torch.randn(2, 4)
    loss = model(x).sum()
    loss.backward()
    return loss.item()


def overwrite_ops(buf):
    a = buf + 1
    b = a * 2
    buf.fill_(7.0)        # the op that overwrites the watched buffer
    return (b.sum() + buf.sum()).item()


def main():
    what = sys.argv[1]
    if what == "model":
        print("loss %.4f" % model_step())
    elif what == "watch-api":
        import memscope

        buf = torch.zeros(16)
        memscope.watcher.watch(buf, name="buf")
        print("result %.1f" % overwrite_ops(buf))
    elif what == "watch-cli":
        x = torch.ones(8)
        a = x + 1            # aten.add.Tensor: its output becomes the watched set
        c = x * 3            # does not touch it
        a.mul_(3)            # overwrites it
        print("result %.1f" % (a.sum() + c.sum()).item())   # aten.sum.default ends the watch
    elif what == "watch-addr":
        import memscope

        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "examples", "sim-npu"))
        import train

        npu = train.Npu(sys.argv[2])
        npu.aclInit(None)
        npu.aclrtSetDevice(0)
        ptr = ctypes.c_void_p()
        npu.halMemAlloc(ctypes.byref(ptr), 4096, 1 << 10)
        ctypes.memset(ptr.value, 0, 4096)
        t = torch.frombuffer((ctypes.c_uint8 * 4096).from_address(ptr.value), dtype=torch.uint8)
        memscope.watcher.watch(ptr.value, length=4096, name="devbuf")
        u = t + 1
        t.fill_(5)           # overwrites the device buffer
        print("result %d" % (int(u.sum()) + int(t.sum())))
        memscope.watcher.remove(ptr.value, length=4096)
        npu.halMemFree(ptr)

    elif what == "watch-cpu":
        import memscope

        raw = (ctypes.c_uint8 * 4096)()
        t = torch.frombuffer(raw, dtype=torch.uint8)
        memscope.watcher.watch(ctypes.addressof(raw), length=4096, name="cpubuf")
        u = t + 1
        t.fill_(5)           # overwrites the watched CPU memory
        print("result %d" % (int(u.sum()) + int(t.sum())))
        memscope.watcher.remove(ctypes.addressof(raw), length=4096)
        try:
            memscope.watcher.watch(8, length=4096, name="nowhere")
        except ValueError as e:
            print("refused: %s" % e)


if __name__ == "__main__":
    main()
