"""A torch_npu-shaped stand-in for the sanitizer tests (issue 36): ``torch_npu.npu.mstx`` is
sim-npu's Python msTX module (its marks reach the probe), ``torch_npu.npu._sanitizer`` records
what its kernel-launch handler is given."""
