#!/usr/bin/env python3
"""A fake torch_npu training job over the sim-npu stand-in libraries.

It drives the simulated CANN stack the way a torch_npu job does, with
ctypes only, so that `memscope run python3 train.py` has realistic traffic
to trace: HAL allocations, a caching allocator reporting through the msTX
memory API (domains ptaCaching / ptaWorkspace), step ranges, op marks,
kernel launches (with profiling-callback kernel names), an optional ATB op,
pinned host memory - and a deliberate leak.

Nothing here sets an environment variable a tracer needs; the tracer is
LD_PRELOADed by `memscope run`. Entry points a tracer interposes (HAL, ACL,
rt launches) are resolved through the process's global scope, exactly like
a PLT call from a linked library, so a preloaded hook sees them.

Which msTX front end carries what:
  libms_tools_ext.so  (the framework's copy): domains, heaps, regions and
                      the "step start" ranges.
  libmstx_pyfront.so  (through python/mstx.py, the Python `mstx` module):
                      the per-op marks "op:<name>".
so a traced run performs two InitInjectionMstx handshakes.

Per step s (1-based) on device d = (s-1) % devices:
  [if devices > 1] aclrtSetDevice(d)
  id = mstxRangeStartA("step start", NULL)                 (libms_tools_ext)
  op:embedding   cache 2 MiB               ; aclrtLaunchKernelWithConfig EmbeddingKernel
  op:matmul_qkv  cache 3 x 2 MiB (1 batch) ; rtKernelLaunch              MatMulQKVKernel
  op:attention   cache 2 MiB, workspace 1 MiB ; aclrtLaunchKernelWithConfig FlashAttentionKernel
                 then free workspace, free q,k,v (1 batch of 3)
  op:mlp         cache 8 MiB               ; rtKernelLaunch              MlpKernel
  op:loss        cache 4096 B              ; aclrtLaunchKernelWithConfig CrossEntropyLossKernel
  op:backward    cache 4 MiB               ; rtKernelLaunch              MatMulGradKernel
  [ATB_HOME_PATH set] op:atb_linear  cache 2 x 1 MiB (1 batch), workspace 2 MiB;
                 stub_atb_run("LinearOperation") -> rtKernelLaunchWithHandleV2
                 LinearOperationKernel; then free workspace
  [s >= 3 and not --no-leak] cache 4 MiB that is never freed (the leak)
  [--step-ms N] sleep N ms (the step's compute time)
  free every other block of the step (1 batch: 5, or 7 with ATB)
  mstxRangeEnd(id)

With --oom fragmentation|shortage|other-process it runs, instead of the steps, one of the
caching allocator's out-of-memory scenarios of python/oom_scenarios.py and dies of it. With
--torch (torch needed) it trains python/torch_loop.py's small transformer on torch, its
storages blocks of the PTA caching pool, and prints the figures torch measured.

Usage: python3 train.py [--steps N] [--devices N] [--no-leak] [--oom KIND] [--torch]
"""

import argparse
import ctypes
import os
import sys
import time

MiB = 1 << 20
GiB = 1 << 30

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(SCRIPT_DIR, "..", ".."))

# HAL flag layout (abi.md §2.3) and module ids (§2.4).
MEMTYPE_DEVICE = 1 << 10
HUGE_PAGE = 1 << 17
MODULE_RUNTIME = 7
ACL_HOST_REG_PINNED = 0x10000000
ACL_MEM_MALLOC_HUGE_FIRST = 0
DRV_ERROR_OUT_OF_MEMORY = 6

CACHING_SEGMENT = 1 * GiB     # one big segment per device, like a pre-reserved pool
WORKSPACE_SEGMENT = 64 * MiB
WEIGHTS_BYTES = 16 * MiB      # per device, through aclrtMalloc
PINNED_BYTES = 2 * MiB
LEAK_BYTES = 4 * MiB
LEAK_FROM_STEP = 3
BLOCK_ROUND = 512


def die(msg):
    print("train.py: error: %s" % msg, file=sys.stderr)
    sys.exit(1)


def find_sim_npu_dir():
    """SIM_NPU_DIR, else <repo>/target/{release,debug}/sim-npu, newest first."""
    marker = os.path.join("lib64", "libascendcl.so")
    env = os.environ.get("SIM_NPU_DIR")
    if env:
        if not os.path.isfile(os.path.join(env, marker)):
            die("SIM_NPU_DIR=%s does not contain %s" % (env, marker))
        return env
    found = []
    for profile in ("release", "debug"):
        d = os.path.join(REPO_ROOT, "target", profile, "sim-npu")
        if os.path.isfile(os.path.join(d, marker)):
            found.append(d)
    if not found:
        die("cannot find the sim-npu stand-in libraries: looked in %s and %s; "
            "build them with `cargo build -p sim-npu` (or --release), or set SIM_NPU_DIR"
            % (os.path.join(REPO_ROOT, "target", "release", "sim-npu"),
               os.path.join(REPO_ROOT, "target", "debug", "sim-npu")))
    found.sort(key=lambda d: os.path.getmtime(os.path.join(d, marker)), reverse=True)
    return found[0]


# ---- msTX descriptor structs (abi.md §1.3) ---------------------------------

class RangeDesc(ctypes.Structure):
    _fields_ = [("deviceId", ctypes.c_uint32), ("ptr", ctypes.c_void_p),
                ("size", ctypes.c_uint64)]


class HeapDesc(ctypes.Structure):
    _fields_ = [("usage", ctypes.c_uint32), ("type", ctypes.c_uint32),
                ("typeSpecificDesc", ctypes.c_void_p)]


class RegisterBatch(ctypes.Structure):
    _fields_ = [("heap", ctypes.c_void_p), ("regionType", ctypes.c_uint32),
                ("regionCount", ctypes.c_size_t), ("regionDescArray", ctypes.c_void_p),
                ("regionHandleArrayOut", ctypes.c_void_p)]


class RegionRef(ctypes.Structure):
    _fields_ = [("refType", ctypes.c_uint32), ("pointer", ctypes.c_void_p)]


class UnregisterBatch(ctypes.Structure):
    _fields_ = [("refCount", ctypes.c_size_t), ("refArray", ctypes.c_void_p)]


class LaunchKernelCfg(ctypes.Structure):
    _fields_ = [("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_size_t)]


REF_POINTER = 0


class Counters:
    def __init__(self):
        self.__dict__.update(dict.fromkeys((
            "marks", "ranges", "launches", "hal_allocs", "hal_frees",
            "heaps_registered", "heaps_unregistered"), 0))
        self.pools = {}

    def pool(self, name):
        return self.pools.setdefault(name, dict.fromkeys(
            ("register_calls", "regions", "unregister_calls", "refs"), 0))


class Npu:
    """The CANN entry points, resolved like PLT calls."""

    def __init__(self, sim_dir):
        lib64 = os.path.join(sim_dir, "lib64")
        mode = os.RTLD_NOW | os.RTLD_GLOBAL
        for name in ("libascend_hal.so", "libprofapi.so", "libruntime.so",
                     "libascendcl_impl.so", "libascendcl.so"):
            ctypes.CDLL(os.path.join(lib64, name), mode=mode)
        # The framework's own msTX front end.
        self.mstx = ctypes.CDLL(os.path.join(lib64, "libms_tools_ext.so"), mode=mode)
        # dlopen(NULL): symbol lookups search the global scope, preloads first.
        g = ctypes.CDLL(None)
        P, I, U32, U64, SZ = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                              ctypes.c_uint64, ctypes.c_size_t)
        PP = ctypes.POINTER(ctypes.c_void_p)

        def fn(lib, name, res, *args):
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = list(args)
            return f

        self.aclInit = fn(g, "aclInit", I, ctypes.c_char_p)
        self.aclFinalize = fn(g, "aclFinalize", I)
        self.aclrtSetDevice = fn(g, "aclrtSetDevice", I, ctypes.c_int32)
        self.aclrtResetDevice = fn(g, "aclrtResetDevice", I, ctypes.c_int32)
        self.aclrtCreateStream = fn(g, "aclrtCreateStream", I, PP)
        self.aclrtDestroyStream = fn(g, "aclrtDestroyStream", I, P)
        self.aclrtMalloc = fn(g, "aclrtMalloc", I, PP, SZ, I)
        self.aclrtFree = fn(g, "aclrtFree", I, P)
        self.aclrtHostRegisterV2 = fn(g, "aclrtHostRegisterV2", I, P, U64, U32)
        self.aclrtHostUnregister = fn(g, "aclrtHostUnregister", I, P)
        self.aclrtBinaryGetFunction = fn(g, "aclrtBinaryGetFunction", I, P, ctypes.c_char_p, PP)
        self.aclrtLaunchKernelWithConfig = fn(g, "aclrtLaunchKernelWithConfig", I,
                                              P, U32, P, ctypes.POINTER(LaunchKernelCfg), P, P)
        self.rtFunctionRegister = fn(g, "rtFunctionRegister", I, P, P, ctypes.c_char_p, P, U32)
        self.rtKernelLaunch = fn(g, "rtKernelLaunch", I, P, U32, P, U32, P, P)
        self.halMemAlloc = fn(g, "halMemAlloc", I, PP, ctypes.c_ulonglong, ctypes.c_ulonglong)
        self.halMemFree = fn(g, "halMemFree", I, P)
        self.sim_hal_live_bytes = fn(g, "sim_hal_live_bytes", U64, U32)

        m = self.mstx
        self.mstxRangeStartA = fn(m, "mstxRangeStartA", U64, ctypes.c_char_p, P)
        self.mstxRangeEnd = fn(m, "mstxRangeEnd", None, U64)
        self.mstxDomainCreateA = fn(m, "mstxDomainCreateA", P, ctypes.c_char_p)
        self.mstxMemHeapRegister = fn(m, "mstxMemHeapRegister", P, P, ctypes.POINTER(HeapDesc))
        self.mstxMemHeapUnregister = fn(m, "mstxMemHeapUnregister", None, P, P)
        self.mstxMemRegionsRegister = fn(m, "mstxMemRegionsRegister", None, P,
                                         ctypes.POINTER(RegisterBatch))
        self.mstxMemRegionsUnregister = fn(m, "mstxMemRegionsUnregister", None, P,
                                           ctypes.POINTER(UnregisterBatch))


def check(rc, what):
    if rc != 0:
        die("%s failed with %d" % (what, rc))


class Segment:
    def __init__(self, dev, base, size, heap):
        self.dev, self.base, self.size, self.heap = dev, base, size, heap
        self.free = [(0, size)]   # sorted (offset, length) runs
        self.live = 0

    def take(self, size):
        for i, (off, length) in enumerate(self.free):
            if length >= size:
                if length == size:
                    del self.free[i]
                else:
                    self.free[i] = (off + size, length - size)
                self.live += 1
                return self.base + off
        return None

    def give_back(self, ptr, size):
        off = ptr - self.base
        runs = sorted(self.free + [(off, size)])
        merged = [runs[0]]
        for o, n in runs[1:]:
            po, pn = merged[-1]
            if po + pn == o:
                merged[-1] = (po, pn + n)
            else:
                merged.append((o, n))
        self.free = merged
        self.live -= 1


class CachingAllocator:
    """A device-memory pool that reports itself through the msTX memory API.

    Segments come from halMemAlloc and are registered as heaps; every
    handed-out block is registered as a region (one RegionsRegister per
    allocation call, batches allowed) and unregistered by POINTER on free.
    empty_cache() releases segments without live blocks: HeapUnregister,
    then halMemFree. Segments still holding blocks (leaks) are kept.
    """

    def __init__(self, npu, counters, domain, segment_size):
        self.npu, self.counters, self.name = npu, counters, domain
        self.segment_size = segment_size
        self.domain = npu.mstxDomainCreateA(domain.encode())
        self.segments = []
        self.blocks = {}   # ptr -> (segment, size)

    def _reserve(self, dev, min_size):
        size = max(self.segment_size, -(-min_size // (2 * MiB)) * (2 * MiB))
        ptr = ctypes.c_void_p()
        flag = (MODULE_RUNTIME << 56) | HUGE_PAGE | MEMTYPE_DEVICE | dev
        rc = self.npu.halMemAlloc(ctypes.byref(ptr), size, flag)
        if rc == DRV_ERROR_OUT_OF_MEMORY:
            raise MemoryError("NPU out of memory: halMemAlloc(%d) on device %d" % (size, dev))
        check(rc, "halMemAlloc")
        self.counters.hal_allocs += 1
        rng = RangeDesc(dev, ptr.value, size)
        desc = HeapDesc(0, 0, ctypes.cast(ctypes.pointer(rng), ctypes.c_void_p))
        heap = self.npu.mstxMemHeapRegister(self.domain, ctypes.byref(desc))
        self.counters.heaps_registered += 1
        seg = Segment(dev, ptr.value, size, heap)
        self.segments.append(seg)
        return seg

    def alloc(self, dev, sizes):
        """Allocates len(sizes) blocks, reported as one region batch."""
        ptrs, descs = [], []
        for size in sizes:
            size = -(-size // BLOCK_ROUND) * BLOCK_ROUND
            for seg in self.segments:
                if seg.dev == dev:
                    ptr = seg.take(size)
                    if ptr is not None:
                        break
            else:
                seg = self._reserve(dev, size)
                ptr = seg.take(size)
            self.blocks[ptr] = (seg, size)
            ptrs.append(ptr)
            descs.append(RangeDesc(dev, ptr, size))
        arr = (RangeDesc * len(descs))(*descs)
        batch = RegisterBatch(self.blocks[ptrs[0]][0].heap, 0, len(descs),
                              ctypes.cast(arr, ctypes.c_void_p), None)
        self.npu.mstxMemRegionsRegister(self.domain, ctypes.byref(batch))
        stats = self.counters.pool(self.name)
        stats["register_calls"] += 1
        stats["regions"] += len(descs)
        return ptrs

    def free(self, ptrs):
        """Frees blocks, reported as one unregister batch (refType POINTER)."""
        refs = (RegionRef * len(ptrs))(*[RegionRef(REF_POINTER, p) for p in ptrs])
        batch = UnregisterBatch(len(ptrs), ctypes.cast(refs, ctypes.c_void_p))
        self.npu.mstxMemRegionsUnregister(self.domain, ctypes.byref(batch))
        stats = self.counters.pool(self.name)
        stats["unregister_calls"] += 1
        stats["refs"] += len(ptrs)
        for p in ptrs:
            seg, size = self.blocks.pop(p)
            seg.give_back(p, size)

    def empty_cache(self):
        kept = []
        for seg in self.segments:
            if seg.live:
                kept.append(seg)
                continue
            self.npu.mstxMemHeapUnregister(self.domain, seg.heap)
            self.counters.heaps_unregistered += 1
            check(self.npu.halMemFree(seg.base), "halMemFree")
            self.counters.hal_frees += 1
        self.segments = kept


class Kernels:
    """Kernel handles: ACL function handles and rt stub functions by name."""

    def __init__(self, npu):
        self.npu = npu
        self.handles = {}
        self.stubs = {}    # name -> ctypes buffer whose address is the stubFunc
        self.cfg = LaunchKernelCfg(None, 0)

    def acl(self, name, stream, args_ptr):
        h = self.handles.get(name)
        if h is None:
            h = ctypes.c_void_p()
            check(self.npu.aclrtBinaryGetFunction(None, name.encode(), ctypes.byref(h)),
                  "aclrtBinaryGetFunction")
            self.handles[name] = h
        args = ctypes.c_void_p(args_ptr)
        check(self.npu.aclrtLaunchKernelWithConfig(h, 8, stream, ctypes.byref(self.cfg),
                                                   ctypes.addressof(args), None),
              "aclrtLaunchKernelWithConfig")

    def rt(self, name, stream, args_ptr):
        stub = self.stubs.get(name)
        if stub is None:
            stub = ctypes.create_string_buffer(8)
            check(self.npu.rtFunctionRegister(None, ctypes.addressof(stub), name.encode(),
                                              None, 0), "rtFunctionRegister")
            self.stubs[name] = stub
        args = ctypes.c_void_p(args_ptr)
        check(self.npu.rtKernelLaunch(ctypes.addressof(stub), 8, ctypes.addressof(args),
                                      ctypes.sizeof(args), None, stream), "rtKernelLaunch")


def load_atb():
    home = os.environ.get("ATB_HOME_PATH")
    if not home:
        return None
    path = os.path.join(home, "lib", "libatb.so")
    if not os.path.isfile(path):
        die("ATB_HOME_PATH is set but %s does not exist" % path)
    atb = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    f = atb.stub_atb_run
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                  ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                  ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p]
    return f


def run_atb(stub_atb_run, stream, in_ptr, in_size, out_ptr, out_size, ws_ptr, ws_size):
    ins = (ctypes.c_void_p * 1)(in_ptr)
    in_sizes = (ctypes.c_uint64 * 1)(in_size)
    outs = (ctypes.c_void_p * 1)(out_ptr)
    out_sizes = (ctypes.c_uint64 * 1)(out_size)
    check(stub_atb_run(b"LinearOperation", 1, ins, in_sizes, 1, outs, out_sizes,
                       ws_ptr, ws_size, stream), "stub_atb_run")


def parse_args(argv):
    p = argparse.ArgumentParser(description="Fake torch_npu training job on the sim-npu stand-ins.")
    p.add_argument("--steps", type=int, default=10, help="training steps (default 10)")
    p.add_argument("--devices", type=int, default=1,
                   help="devices to alternate between, step by step (default 1)")
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="compute time of a step, slept before its blocks are freed (default 0: "
                        "the 10 steps take a few ms, shorter than one --sample interval)")
    p.add_argument("--no-leak", action="store_true",
                   help="do not leak the 4 MiB block per step from step 3 on")
    p.add_argument("--torch", action="store_true",
                   help="instead of the fake ops, train a small transformer with AdamW on torch "
                        "(CPU) whose storages are blocks of the PTA caching pool "
                        "(python/torch_loop.py); prints the figures it measured itself")
    p.add_argument("--oom", choices=("fragmentation", "shortage", "other-process"),
                   help="instead of the training steps, run an out-of-memory scenario of the "
                        "caching allocator (python/oom_scenarios.py); the job then dies of it")
    args = p.parse_args(argv)
    if args.steps < 0:
        p.error("--steps must be >= 0")
    if not args.step_ms >= 0:
        p.error("--step-ms must be >= 0")
    if args.devices < 1:
        p.error("--devices must be >= 1")
    return args


def train_torch(npu, steps):
    """`--torch`: the small transformer of python/torch_loop.py, its storages PTA blocks, each
    step an msTX "step start" range; prints the figures torch itself gives."""
    import json
    try:
        import torch_loop
    except ModuleNotFoundError as e:
        sys.exit("train.py: --torch needs torch (pip install torch): %s" % e)

    pool = torch_loop.SimPtaPool(npu, RangeDesc, RegisterBatch, RegionRef, UnregisterBatch,
                                 REF_POINTER)
    ranges = []

    def on_step(i, begin):
        if begin:
            ranges.append(npu.mstxRangeStartA(b"step start", None))
        else:
            npu.mstxRangeEnd(ranges.pop())

    with pool.mode:
        figures = torch_loop.train(max(steps, 2), on_step)
    print("train.py: torch figures %s" % json.dumps(figures, sort_keys=True))
    return 0


def main(argv=None):
    args = parse_args(argv)
    sim_dir = find_sim_npu_dir()
    npu = Npu(sim_dir)
    sys.path.insert(0, os.path.join(SCRIPT_DIR, "python"))
    import mstx   # the Python mstx module shim (its own front-end copy)
    mstx._use_lib_dir(sim_dir)
    stub_atb_run = load_atb()

    c = Counters()
    check(npu.aclInit(None), "aclInit")
    check(npu.aclrtSetDevice(0), "aclrtSetDevice")
    stream = ctypes.c_void_p()
    check(npu.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")

    pinned = ctypes.create_string_buffer(PINNED_BYTES)
    check(npu.aclrtHostRegisterV2(ctypes.addressof(pinned), PINNED_BYTES, ACL_HOST_REG_PINNED),
          "aclrtHostRegisterV2")

    caching = CachingAllocator(npu, c, "ptaCaching", CACHING_SEGMENT)
    workspace = CachingAllocator(npu, c, "ptaWorkspace", WORKSPACE_SEGMENT)
    kernels = Kernels(npu)
    weights = {}
    leaked = []
    if args.oom:
        import oom_scenarios
        oom_scenarios.run(args.oom, npu, CachingAllocator, c)
    if args.torch:
        return train_torch(npu, args.steps)

    def mark(op):
        mstx.mark("op:" + op)
        c.marks += 1

    def launch(kind, name, args_ptr):
        (kernels.acl if kind == "acl" else kernels.rt)(name, stream, args_ptr)
        c.launches += 1

    for step in range(1, args.steps + 1):
        dev = (step - 1) % args.devices
        if args.devices > 1:
            check(npu.aclrtSetDevice(dev), "aclrtSetDevice")
        if dev not in weights:
            w = ctypes.c_void_p()
            check(npu.aclrtMalloc(ctypes.byref(w), WEIGHTS_BYTES, ACL_MEM_MALLOC_HUGE_FIRST),
                  "aclrtMalloc")
            c.hal_allocs += 1
            weights[dev] = w

        rid = npu.mstxRangeStartA(b"step start", None)
        c.ranges += 1

        mark("embedding")
        (emb,) = caching.alloc(dev, [2 * MiB])
        launch("acl", "EmbeddingKernel", emb)

        mark("matmul_qkv")
        qkv = caching.alloc(dev, [2 * MiB, 2 * MiB, 2 * MiB])
        launch("rt", "MatMulQKVKernel", qkv[0])

        mark("attention")
        (attn,) = caching.alloc(dev, [2 * MiB])
        (ws,) = workspace.alloc(dev, [1 * MiB])
        launch("acl", "FlashAttentionKernel", attn)
        workspace.free([ws])
        caching.free(qkv)

        mark("mlp")
        (mlp,) = caching.alloc(dev, [8 * MiB])
        launch("rt", "MlpKernel", mlp)

        mark("loss")
        (loss,) = caching.alloc(dev, [4096])
        launch("acl", "CrossEntropyLossKernel", loss)

        mark("backward")
        (grad,) = caching.alloc(dev, [4 * MiB])
        launch("rt", "MatMulGradKernel", grad)

        step_blocks = [emb, attn, mlp, loss, grad]
        if stub_atb_run is not None:
            mark("atb_linear")
            atb_in, atb_out = caching.alloc(dev, [1 * MiB, 1 * MiB])
            (atb_ws,) = workspace.alloc(dev, [2 * MiB])
            run_atb(stub_atb_run, stream, atb_in, 1 * MiB, atb_out, 1 * MiB, atb_ws, 2 * MiB)
            c.launches += 1
            workspace.free([atb_ws])
            step_blocks += [atb_in, atb_out]

        if not args.no_leak and step >= LEAK_FROM_STEP:
            leaked.extend(caching.alloc(dev, [LEAK_BYTES]))
        if args.step_ms > 0:
            time.sleep(args.step_ms / 1000.0)

        caching.free(step_blocks)
        npu.mstxRangeEnd(rid)

    # Teardown: everything except the leaked blocks (and the segments that
    # hold them) is given back.
    workspace.empty_cache()
    caching.empty_cache()
    for dev, w in sorted(weights.items()):
        check(npu.aclrtFree(w), "aclrtFree")
        c.hal_frees += 1
    check(npu.aclrtHostUnregister(ctypes.addressof(pinned)), "aclrtHostUnregister")
    check(npu.aclrtDestroyStream(stream), "aclrtDestroyStream")
    for dev in sorted(set(weights) | {0}):
        check(npu.aclrtResetDevice(dev), "aclrtResetDevice")
    check(npu.aclFinalize(), "aclFinalize")

    cp, wp = c.pool("ptaCaching"), c.pool("ptaWorkspace")
    print("train.py: steps=%d devices=%d atb=%s leaked_blocks=%d leaked_bytes=%d"
          % (args.steps, args.devices, "on" if stub_atb_run else "off",
             len(leaked), len(leaked) * LEAK_BYTES))
    print("train.py: marks=%d ranges=%d launches=%d "
          "caching_register_calls=%d caching_regions=%d caching_unregister_calls=%d "
          "caching_refs=%d workspace_regions=%d workspace_refs=%d "
          "heaps_registered=%d heaps_unregistered=%d hal_allocs=%d hal_frees=%d"
          % (c.marks, c.ranges, c.launches,
             cp["register_calls"], cp["regions"], cp["unregister_calls"], cp["refs"],
             wp["regions"], wp["refs"],
             c.heaps_registered, c.heaps_unregistered, c.hal_allocs, c.hal_frees))
    return 0


# Streams and events (issue 36), for programs that drive the stand-ins through Npu
# (tests/python/npu_streams.py); the job above makes none of these calls. Resolved on first use,
# like the calls in Npu.__init__, and defined after main() so that the line numbers the guide and
# the tests show stay as they are. aclrtEvent is a handle, like aclrtStream.
_P, _PP = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
_STREAM_FNS = {
    "aclrtCreateEvent": (_PP,),
    "aclrtDestroyEvent": (_P,),
    "aclrtRecordEvent": (_P, _P),        # (event, stream)
    "aclrtStreamWaitEvent": (_P, _P),    # (stream, event)
    "aclrtSynchronizeStream": (_P,),
    "aclrtSynchronizeEvent": (_P,),
    "aclrtSynchronizeDevice": (),
}


def _npu_stream_fn(npu, name):
    if name not in _STREAM_FNS:
        raise AttributeError(name)
    f = getattr(ctypes.CDLL(None), name)
    f.restype = ctypes.c_int
    f.argtypes = list(_STREAM_FNS[name])
    setattr(npu, name, f)
    return f


Npu.__getattr__ = _npu_stream_fn


if __name__ == "__main__":
    try:
        sys.exit(main())
    except MemoryError as e:   # halMemAlloc said DRV_ERROR_OUT_OF_MEMORY
        die(str(e))
