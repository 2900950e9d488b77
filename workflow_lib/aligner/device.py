"""Which kernels this process can run: numba for the compiled CPU kernels, a CUDA device for the torch and Triton
ones.

Both checks import their optional dependency only when asked, and only once per process; the kernel modules
(:mod:`~workflow_lib.aligner.compiled`, :mod:`~workflow_lib.aligner.identity_compiled`,
:mod:`~workflow_lib.aligner.hmm_compiled`, :mod:`~workflow_lib.aligner.torch_kernels`,
:mod:`~workflow_lib.aligner.triton_kernels`) and the code that chooses between them all ask here.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache

KERNELS_ENV = "TRACKFOLD_KERNELS"
"""``numpy`` forces the NumPy kernels; anything else (or unset) uses the compiled ones where numba imports."""

_CUDA: bool | None = None


@lru_cache(maxsize=None)
def numba_module():
    """The ``numba`` module, or None where it does not import (then the NumPy kernels run)."""
    try:
        import numba
    except ImportError:
        return None
    return numba


def compiled_available() -> bool:
    """Whether the compiled kernels run in this process (numba importable and not switched off)."""
    return os.environ.get(KERNELS_ENV, "").strip().lower() != "numpy" and numba_module() is not None


def cuda_available() -> bool:
    """``torch.cuda.is_available()`` (False without torch). Without an NVIDIA driver on the machine
    (``/proc/driver/nvidia``, ``/dev/nvidiactl``) torch is not even imported, so CPU-only jobs do not pay
    for the import; the answer is cached per process."""
    global _CUDA
    if _CUDA is None:
        driver = os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidiactl")
        if not driver or importlib.util.find_spec("torch") is None:
            _CUDA = False
        else:
            import torch
            _CUDA = bool(torch.cuda.is_available())
    return _CUDA
