"""torch.nn.Module as the tracer sees it: __call__ is `_call_impl` in torch/nn/modules/module.py."""


class Module:
    def _call_impl(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    __call__ = _call_impl
