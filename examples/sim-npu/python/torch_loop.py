"""A small transformer trained with AdamW on torch (CPU), the model of the role decomposition
(issue 25): `train.py --torch` runs it on the sim-npu (its storages are blocks of the
PTA caching pool), and memscope's tests run it on plain CPU torch.

`train()` returns what an independent measurement gives: the bytes of the parameters, of their
gradients and of the optimizer state after the last step, and per leaf module the bytes of its
outputs in the second step's forward (summed by forward hooks of its own). Gradients are zeroed
in place (`set_to_none=False`), so from the second step on every gradient is live during the
forward and backward, where the peak is.

`SimPtaPool` makes torch's storages blocks of the sim-npu's PTA caching pool: each new storage
is registered as a region of the `ptaCaching` msTX domain at its own address and size, and
unregistered when torch frees it, as torch_npu's caching allocator reports its blocks.
"""

import ctypes
import weakref

import torch
from torch import nn

VOCAB, DIM, SEQ, BATCH, LAYERS = 256, 128, 16, 4, 2


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.out = nn.Linear(DIM, DIM)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        q, k, v = self.qkv(x).split(DIM, dim=-1)
        return self.out(self.softmax((q @ k.transpose(1, 2)) / DIM ** 0.5) @ v)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.attn = Attention()
        self.ln2 = nn.LayerNorm(DIM)
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)

    def forward(self, ids):
        x = self.embed(ids) + self.pos(torch.arange(ids.shape[1]))
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Lm(nn.Module):
    """`model.layers.<i>.mlp.fc1` and the like, as named_modules() names them."""

    def __init__(self):
        super().__init__()
        self.model = Body()
        self.lm_head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.lm_head(self.model(ids))


def _nbytes(t):
    return t.untyped_storage().nbytes()


def train(steps=3, on_step=None):
    """Trains `steps` steps (`on_step(i, begin)` around each); returns the measured figures."""
    torch.manual_seed(0)
    lm = Lm()
    opt = torch.optim.AdamW(lm.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    target = torch.randint(0, VOCAB, (BATCH, SEQ))
    outputs = {}
    measuring = [False]

    def measure(name):
        def hook(module, args, out):
            if measuring[0]:
                outputs[name] = outputs.get(name, 0) + _nbytes(out)
        return hook

    for name, m in lm.named_modules():
        if name and not list(m.children()):
            m.register_forward_hook(measure(name))
    for step in range(steps):
        if on_step:
            on_step(step, True)
        measuring[0] = step == 1
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(lm(ids).view(-1, VOCAB), target.view(-1))
        loss.backward()
        opt.step()
        if on_step:
            on_step(step, False)
    params = list(lm.parameters())
    state = [v for p in params for v in opt.state[p].values() if torch.is_tensor(v)]
    return {
        "weight": sum(_nbytes(p) for p in params),
        "gradient": sum(_nbytes(p.grad) for p in params),
        "optimizer_state": sum(_nbytes(v) for v in state),
        "param_nbytes": sum(p.nbytes for p in params),
        "grad_nbytes": sum(p.grad.nbytes for p in params),
        "state_nbytes": sum(v.nbytes for v in state),
        "outputs": outputs,
    }


class SimPtaPool:
    """torch storages as blocks of the sim-npu PTA caching pool (see the module docs)."""

    def __init__(self, npu, range_desc, register_batch, region_ref, unregister_batch, ref_ptr):
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        self.npu = npu
        self.domain = npu.mstxDomainCreateA(b"ptaCaching")
        self.types = (range_desc, register_batch, region_ref, unregister_batch, ref_ptr)
        self.live = set()
        pool = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        pool.block(t)
                return out

        self.mode = Mode()

    def block(self, t):
        try:
            st = t.untyped_storage()
            ptr, size = st.data_ptr(), st.nbytes()
        except (RuntimeError, NotImplementedError):
            return
        if not ptr or not size or ptr in self.live:
            return
        rd, batch, _, _, _ = self.types
        self.live.add(ptr)
        arr = (rd * 1)(rd(0, ptr, size))
        self.npu.mstxMemRegionsRegister(
            self.domain, ctypes.byref(batch(None, 0, 1, ctypes.cast(arr, ctypes.c_void_p), None)))
        weakref.finalize(st, self.freed, ptr)

    def freed(self, ptr):
        if ptr not in self.live:
            return
        self.live.discard(ptr)
        _, _, ref, unbatch, ref_ptr = self.types
        refs = (ref * 1)(ref(ref_ptr, ptr))
        self.npu.mstxMemRegionsUnregister(
            self.domain, ctypes.byref(unbatch(1, ctypes.cast(refs, ctypes.c_void_p))))
