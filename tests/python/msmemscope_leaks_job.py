"""msMemScope's documented Python-API leak example (its user guide and example/leaks/python),
as a job over the sim-npu stand-ins instead of torch_npu: `import msmemscope`, config() before
the model is made, start(), six epochs that each keep one 4000256-byte block (the leak) and end
with step(), stop().

msMemScope's documented result: leaks at steps 2, 3, 4 and 5, 3.814941 Mb(s) each, 4
allocations in all; the model's weights, allocated before start(), are written once when the
window opens ("history-aware") and are no leak.

Usage: python msmemscope_leaks_job.py SIM_NPU_EXAMPLE_DIR
Prints `leaks_job: ok` at the end.
"""
import sys

sys.path.insert(0, sys.argv[1])
import msmemscope  # noqa: E402
import train  # noqa: E402  (the sim-npu job's building blocks, standing in for torch_npu)

MiB = 1 << 20
LEAK = 4000256  # torch.randn(1000, 1000) on the NPU, as torch_npu's caching allocator rounds it

leaks_tensor_list = []


def test():
    msmemscope.config(events="alloc,free,launch", format="csv", output_path="./output")
    npu = train.Npu(train.find_sim_npu_dir())
    c = train.Counters()
    train.check(npu.aclInit(None), "aclInit")
    train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
    caching = train.CachingAllocator(npu, c, "ptaCaching", train.CACHING_SEGMENT)
    weights = caching.alloc(0, [400, 40])          # the model: Linear(10, 10)
    inputs = caching.alloc(0, [32 * 10 * 4, 32 * 10 * 4])
    scratch = caching.alloc(0, [MiB])              # made and dropped before start(): no row
    caching.free(scratch)

    msmemscope.start()
    for _epoch in range(6):
        acts = caching.alloc(0, [32 * 10 * 4, 4, 400, 40])   # forward, loss, gradients
        caching.free(acts)
        leaks_tensor_list.extend(caching.alloc(0, [LEAK]))    # the leak
        caching.empty_cache()
        msmemscope.step()
    msmemscope.stop()
    caching.free(inputs + weights)


if __name__ == "__main__":
    test()
    print("leaks_job: ok")
