"""msMemScope's one-click framework hooks (`init_framework_hooks`) through `import msmemscope`,
on a stand-in `vllm_ascend` package written at run time (its model runner allocates from the
sim-npu caching allocator). The hooks are asked for before the package is imported, so they
go in when it is.

Usage: python framework_hooks_job.py SIM_NPU_EXAMPLE_DIR WORK_DIR
Prints `hooks_job: ok` at the end.
"""
import os
import sys

sys.path.insert(0, sys.argv[1])
import msmemscope  # noqa: E402
import train  # noqa: E402

RUNNER = '''
class NPUModelRunner:
    def __init__(self, caching):
        self.caching = caching

    def execute_model(self, n):
        """Allocates n blocks of 1 MiB and frees all but the last."""
        blocks = self.caching.alloc(0, [1 << 20] * n)
        self.caching.free(blocks[:-1])
        return blocks[-1]

    def profile_run(self):
        return self.caching.alloc(0, [4096])[0]
'''


def write_package(root):
    pkg = os.path.join(root, "vllm_ascend", "worker")
    os.makedirs(pkg, exist_ok=True)
    for d in (os.path.join(root, "vllm_ascend"), pkg):
        open(os.path.join(d, "__init__.py"), "w").close()
    with open(os.path.join(pkg, "model_runner_v1.py"), "w") as f:
        f.write(RUNNER)
    sys.path.insert(0, root)


def main():
    for bad in (("vllm", "11.0", "worker", "decompose"), ("vllm_ascend", "9.0", "worker", "x"),
                ("vllm_ascend", "11.0", "actor", "decompose"),
                ("vllm_ascend", "11.0", "worker", "trace")):
        try:
            msmemscope.init_framework_hooks(*bad)
        except ValueError as e:
            print("refused:", e)
        else:
            raise SystemExit("accepted %r" % (bad,))
    # no torch_npu here: one line says so, and the job goes on
    assert msmemscope.enable_npu_sanitizer() is False
    write_package(sys.argv[2])
    msmemscope.init_framework_hooks("vllm_ascend", "11.0", "worker", "decompose")
    msmemscope.init_framework_hooks("vllm_ascend", "11.0", "worker", "snapshot")
    from vllm_ascend.worker.model_runner_v1 import NPUModelRunner  # hooked on import

    npu = train.Npu(train.find_sim_npu_dir())
    c = train.Counters()
    train.check(npu.aclInit(None), "aclInit")
    train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
    runner = NPUModelRunner(train.CachingAllocator(npu, c, "ptaCaching", train.CACHING_SEGMENT))
    msmemscope.config(analysis="decompose", output_path="./output")
    msmemscope.start()
    runner.profile_run()
    runner.execute_model(3)
    msmemscope.stop()
    hooked = NPUModelRunner.execute_model
    n = msmemscope.cleanup_framework_hooks()
    assert NPUModelRunner.execute_model is not hooked and n == 4, n  # 2 methods x 2 hook types
    assert NPUModelRunner.execute_model.__name__ == "execute_model"
    # a framework this Python does not have: one line says the hooks wait for its import
    msmemscope.init_framework_hooks("verl", "0.7.0", "TaskRunner", "snapshot")
    msmemscope.cleanup_framework_hooks()
    print("hooks_job: ok")


if __name__ == "__main__":
    main()
