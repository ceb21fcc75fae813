"""A stand-in for CPU torch with only what hicann/hixl ``examples/python/hixl/hixl_d2rd_multiproc_sample.py``
calls (``torch.full``, ``torch.zeros``, ``torch.uint8``, ``Tensor.data_ptr``, ``.cpu().numpy()``), backed by
numpy, for machines without torch. Like CPU torch it refuses ``device="npu"``: exec's torch_npu stand-in
is what makes the sample's device buffers, as it does with real torch."""

import numpy as np

uint8 = np.uint8


class Tensor:
    def __init__(self, array):
        self._array = array

    def data_ptr(self):
        return int(self._array.__array_interface__["data"][0])

    def cpu(self):
        return self

    def numpy(self):
        return self._array

    def clone(self):
        return Tensor(self._array.copy())


def _check(device):
    if device not in (None, "cpu"):
        raise RuntimeError(f"Expected one of cpu device type at start of device string: {device}")


def full(size, fill_value, *, dtype=None, device=None):
    _check(device)
    return Tensor(np.full(size, fill_value, dtype=dtype))


def zeros(*size, dtype=None, device=None):
    _check(device)
    shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    return Tensor(np.zeros(shape, dtype=dtype))
