"""Compiled (numba) restraint and clash terms of :func:`workflow_lib.inference.fold.fold_from_distogram`, with
their gradients, in one pass over the pairs.

The torch expressions they replace (:func:`workflow_lib.inference.fold._interpolate` on gathered pair distances,
and the Cα clash on a dense distance matrix) run a dozen full-size tensor operations per step and as many in
the backward pass, each streaming ``starts × pairs`` values through memory: at 600 residues a step cost ~80 ms,
most of it gathers and scatters. Here each pair is read once, its energy and its gradient on both residues
accumulated in float64; the result is the same energy to float rounding (tested against the torch terms).

* Restraints: for the pairs ``(i, j)`` with potential rows ``pot [P, bins]`` and weights ``w [P]``,
  ``E_s = sum_p w_p V_p(|cb_si − cb_sj|)``, ``V`` piecewise linear between the bin centres, constant below the
  first, and beyond the last constant plus ``tail_slope`` per Å (the torch version's clamp and tail).
* Clash: ``C_s = sum_{j ≥ i + 2} max(0, cut − |ca_si − ca_sj|)²``, only pairs closer than ``cut`` contribute, so
  the dense ``L × L`` matrix is never built.

The two kernels repeat the six-line gradient accumulation of a pair on purpose, as the search's compiled
kernels do (:mod:`workflow_lib.search.gapped_compiled`): numba is imported lazily, so a shared jitted helper
could not live at module level.

Used when :func:`workflow_lib.aligner.compiled.available` (numba importable, ``TRACKFOLD_KERNELS`` not
``numpy``); otherwise the torch terms run, with the same results.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from workflow_lib.aligner.compiled import numba_module


@lru_cache(maxsize=None)
def _kernels():
    numba = numba_module()
    jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")

    @jit
    def restraints(cb, pair_i, pair_j, pot, w, centres, step, tail_slope):
        """Per-start energies ``[S]`` and their gradients ``[S, L, 3]`` with respect to ``cb [S, L, 3]``."""
        n_starts, length = cb.shape[0], cb.shape[1]
        n_c = centres.shape[0]
        c_first, c_last = centres[0], centres[n_c - 1]
        energy = np.zeros(n_starts)
        grad = np.zeros((n_starts, length, 3))
        # pairs outside, starts inside: each pair's potential row is read from memory once for all starts
        for p in range(pair_i.shape[0]):
            i, j = pair_i[p], pair_j[p]
            for s in range(n_starts):
                dx = cb[s, i, 0] - cb[s, j, 0]
                dy = cb[s, i, 1] - cb[s, j, 1]
                dz = cb[s, i, 2] - cb[s, j, 2]
                d = np.sqrt(dx * dx + dy * dy + dz * dz)
                dc = min(max(d, c_first), c_last)
                # first centre >= dc (searchsorted, left), kept within [1, n_c - 1]; on evenly spaced centres
                # (all but the last, spacing ``step`` > 0) by arithmetic, else by bisection
                if step > 0.0:
                    if dc > centres[n_c - 2]:
                        lo = n_c - 1
                    else:
                        lo = int(np.ceil((dc - c_first) / step))
                else:
                    lo, hi = 0, n_c
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if centres[mid] < dc:
                            lo = mid + 1
                        else:
                            hi = mid
                upper = min(max(lo, 1), n_c - 1)
                lower = upper - 1
                c0, c1 = centres[lower], centres[upper]
                v0, v1 = pot[p, lower], pot[p, upper]
                slope = (v1 - v0) / (c1 - c0)
                value = v0 + (dc - c0) * slope
                dvalue = slope if c_first < d < c_last else 0.0
                if d > c_last:
                    value += (d - c_last) * tail_slope
                    dvalue += tail_slope
                energy[s] += w[p] * value
                if d > 0.0:
                    coef = w[p] * dvalue / d
                    grad[s, i, 0] += coef * dx
                    grad[s, i, 1] += coef * dy
                    grad[s, i, 2] += coef * dz
                    grad[s, j, 0] -= coef * dx
                    grad[s, j, 1] -= coef * dy
                    grad[s, j, 2] -= coef * dz
        return energy, grad

    @jit
    def clashes(ca, cut):
        """Per-start clash sums ``[S]`` and their gradients ``[S, L, 3]`` with respect to ``ca [S, L, 3]``."""
        n_starts, length = ca.shape[0], ca.shape[1]
        cut2 = cut * cut
        energy = np.zeros(n_starts)
        grad = np.zeros((n_starts, length, 3))
        for s in range(n_starts):
            total = 0.0
            for i in range(length):
                xi, yi, zi = ca[s, i, 0], ca[s, i, 1], ca[s, i, 2]
                for j in range(i + 2, length):
                    dx = xi - ca[s, j, 0]
                    dy = yi - ca[s, j, 1]
                    dz = zi - ca[s, j, 2]
                    d2 = dx * dx + dy * dy + dz * dz
                    if d2 < cut2:
                        d = np.sqrt(d2)
                        r = cut - d
                        total += r * r
                        if d > 0.0:
                            coef = -2.0 * r / d
                            grad[s, i, 0] += coef * dx
                            grad[s, i, 1] += coef * dy
                            grad[s, i, 2] += coef * dz
                            grad[s, j, 0] -= coef * dx
                            grad[s, j, 1] -= coef * dy
                            grad[s, j, 2] -= coef * dz
            energy[s] = total
        return energy, grad

    return restraints, clashes


class CompiledTerms(torch.autograd.Function):
    """``(restraint energies [S], clash sums [S])`` of ``cb [S, L, 3]`` and ``ca [S, L, 3]`` (module doc), with
    the gradients computed in the forward pass."""

    @staticmethod
    def forward(ctx, cb: torch.Tensor, ca: torch.Tensor, pairs: tuple, cut: float):
        """Both terms and their gradients in one call of each kernel (``pairs``: :func:`pair_tables`)."""
        restraints, clashes = _kernels()
        energy, g_cb = restraints(cb.detach().double().numpy(), *pairs)
        clash, g_ca = clashes(ca.detach().double().numpy(), cut)
        ctx.save_for_backward(torch.from_numpy(g_cb).to(cb.dtype), torch.from_numpy(g_ca).to(ca.dtype))
        return torch.from_numpy(energy).to(cb.dtype), torch.from_numpy(clash).to(ca.dtype)

    @staticmethod
    def backward(ctx, grad_energy: torch.Tensor, grad_clash: torch.Tensor):
        """The saved per-start gradients scaled by the incoming ones; none for the tables and the cutoff."""
        g_cb, g_ca = ctx.saved_tensors
        return grad_energy[:, None, None] * g_cb, grad_clash[:, None, None] * g_ca, None, None


def pair_tables(pairs: np.ndarray, pot: np.ndarray, weight: np.ndarray, centres: np.ndarray,
                tail_slope: float) -> tuple:
    """The restraint arguments of :class:`CompiledTerms` as contiguous arrays of the kernel's types, with the
    spacing of the centres when all but the last are evenly spaced (0 otherwise: the kernel bisects)."""
    centres = np.ascontiguousarray(centres, dtype=np.float64)
    gaps = np.diff(centres[:-1])
    step = float(gaps[0]) if len(gaps) and gaps[0] > 0 and np.allclose(gaps, gaps[0], rtol=0, atol=1e-9) else 0.0
    return (np.ascontiguousarray(pairs[:, 0], dtype=np.int64), np.ascontiguousarray(pairs[:, 1], dtype=np.int64),
            np.ascontiguousarray(pot, dtype=np.float64), np.ascontiguousarray(weight, dtype=np.float64),
            centres, step, float(tail_slope))
