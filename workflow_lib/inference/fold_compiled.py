"""Compiled (numba) energy of :func:`workflow_lib.inference.fold.fold_from_distogram`, with its gradients: the
restraint and clash terms in one pass over the pairs (:class:`CompiledTerms`), and the whole energy of a
minimisation step, frames to atoms to Cβ to every term and back by the chain rule, in one call
(:class:`ChainEnergy`).

The torch expressions they replace (:func:`workflow_lib.inference.fold._interpolate` on gathered pair distances,
and the Cα clash on a dense distance matrix) run a dozen full-size tensor operations per step and as many in
the backward pass, each streaming ``starts × pairs`` values through memory, most of the time spent in gathers and
scatters. Here each pair is read once, its energy and its gradient on both residues
accumulated in float64; the result is the same energy to float rounding (tested against the torch terms).

* Restraints: for the pairs ``(i, j)`` with potential rows ``pot [P, bins]`` and weights ``w [P]``,
  ``E_s = sum_p w_p V_p(|cb_si − cb_sj|)``, ``V`` piecewise linear between the bin centres, constant below the
  first, and beyond the last constant plus ``tail_slope`` per Å (the torch version's clamp and tail).
* Clash: ``C_s = sum_{j ≥ i + 2} max(0, cut − |ca_si − ca_sj|)²``, only pairs closer than ``cut`` contribute, so
  the dense ``L × L`` matrix is never built.

The two kernels repeat the six-line gradient accumulation of a pair on purpose, as the search's compiled
kernels do (:mod:`workflow_lib.search.gapped_compiled`): numba is imported lazily, so a shared jitted helper
could not live at module level.

* Whole energy (:class:`ChainEnergy`): unit quaternions and translations -> rotation -> ideal N, CA, C -> virtual
  Cβ (trRosetta's) -> restraints / L + clash weight × clashes / L + bond weight × the C(i)–N(i+1) and
  Cα(i)–Cα(i+1) deviations / (L − 1), as the torch graph of the fold computes it, and the gradient on the
  quaternions through their normalisation. A minimisation step was a graph of about a hundred small tensor
  operations forward and back, whose fixed cost dominated short chains. What the compiled energy saves, by
  length: benchmarks/RESULTS.md, "Structure prediction: the fold's compiled energy".

Used when :func:`workflow_lib.aligner.compiled.available` (numba importable, ``TRACKFOLD_KERNELS`` not
``numpy``); otherwise the torch terms run, with the same results.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from workflow_lib.aligner.device import numba_module
from workflow_lib.model.structure import CA_CA_TRANS, CB_A, CB_B, CB_C, IDEAL_BACKBONE, PEPTIDE_BOND

_IDEAL = np.asarray(IDEAL_BACKBONE, dtype=np.float64)
"""Ideal N, CA, C in a residue's frame, as :func:`~workflow_lib.model.structure.backbone_from_frames` places them."""
_CB_ABC = np.array([CB_A, CB_B, CB_C], dtype=np.float64)
"""trRosetta's virtual-Cβ coefficients, as :func:`~workflow_lib.model.structure.cb_from_backbone` uses them."""


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

    @jit
    def chain_energy(trans, quat, ideal, cb_abc, pair_i, pair_j, pot, w, centres, step, tail_slope, cut,
                     bond_weight, clash_weight, peptide_bond, ca_ca):
        """Per-start energies ``[S]`` of the whole fold energy (restraints / L + clash weight x clashes / L + bond
        weight x chain deviations / (L - 1)) and their gradients with respect to ``trans [S, L, 3]`` and the
        unnormalised ``quat [S, L, 4]``: frames -> N, CA, C -> virtual CB -> terms, and back by the chain rule."""
        n_starts, length = trans.shape[0], trans.shape[1]
        rot = np.empty((n_starts, length, 3, 3))
        qhat = np.empty((n_starts, length, 4))
        norm = np.empty((n_starts, length))
        atoms = np.empty((n_starts, length, 3, 3))        # N, CA, C
        cb = np.empty((n_starts, length, 3))
        b_vec = np.empty((n_starts, length, 3))           # CA - N
        c_vec = np.empty((n_starts, length, 3))           # C - CA
        ca_a, ca_b, ca_c = cb_abc[0], cb_abc[1], cb_abc[2]
        for s in range(n_starts):
            for i in range(length):
                q0, q1, q2, q3 = quat[s, i, 0], quat[s, i, 1], quat[s, i, 2], quat[s, i, 3]
                r = np.sqrt(q0 * q0 + q1 * q1 + q2 * q2 + q3 * q3)
                norm[s, i] = r
                w_, x, y, z = q0 / r, q1 / r, q2 / r, q3 / r
                qhat[s, i, 0], qhat[s, i, 1], qhat[s, i, 2], qhat[s, i, 3] = w_, x, y, z
                rot[s, i, 0, 0] = 1 - 2 * (y * y + z * z)
                rot[s, i, 0, 1] = 2 * (x * y - w_ * z)
                rot[s, i, 0, 2] = 2 * (x * z + w_ * y)
                rot[s, i, 1, 0] = 2 * (x * y + w_ * z)
                rot[s, i, 1, 1] = 1 - 2 * (x * x + z * z)
                rot[s, i, 1, 2] = 2 * (y * z - w_ * x)
                rot[s, i, 2, 0] = 2 * (x * z - w_ * y)
                rot[s, i, 2, 1] = 2 * (y * z + w_ * x)
                rot[s, i, 2, 2] = 1 - 2 * (x * x + y * y)
                for a in range(3):
                    for k in range(3):
                        atoms[s, i, a, k] = (rot[s, i, k, 0] * ideal[a, 0] + rot[s, i, k, 1] * ideal[a, 1]
                                             + rot[s, i, k, 2] * ideal[a, 2] + trans[s, i, k])
                for k in range(3):
                    b_vec[s, i, k] = atoms[s, i, 1, k] - atoms[s, i, 0, k]
                    c_vec[s, i, k] = atoms[s, i, 2, k] - atoms[s, i, 1, k]
                bx, by, bz = b_vec[s, i, 0], b_vec[s, i, 1], b_vec[s, i, 2]
                cx, cy, cz = c_vec[s, i, 0], c_vec[s, i, 1], c_vec[s, i, 2]
                cb[s, i, 0] = ca_a * (by * cz - bz * cy) + ca_b * bx + ca_c * cx + atoms[s, i, 1, 0]
                cb[s, i, 1] = ca_a * (bz * cx - bx * cz) + ca_b * by + ca_c * cy + atoms[s, i, 1, 1]
                cb[s, i, 2] = ca_a * (bx * cy - by * cx) + ca_b * bz + ca_c * cz + atoms[s, i, 1, 2]
        restraint, g_cb = restraints(cb, pair_i, pair_j, pot, w, centres, step, tail_slope)
        ca = np.ascontiguousarray(atoms[:, :, 1, :])
        clash, g_ca = clashes(ca, cut)
        energy = np.empty(n_starts)
        g_atoms = np.zeros((n_starts, length, 3, 3))
        inv_len = 1.0 / length
        bond_scale = bond_weight / max(1, length - 1)
        for s in range(n_starts):
            bonds = 0.0
            for i in range(length - 1):
                # C(i)-N(i+1) and CA(i)-CA(i+1): |d - d0| with d = sqrt(|diff|^2 + 1e-8), as the torch loss
                for first, second, target in ((2, 0, peptide_bond), (1, 1, ca_ca)):
                    dx = atoms[s, i + 1, second, 0] - atoms[s, i, first, 0]
                    dy = atoms[s, i + 1, second, 1] - atoms[s, i, first, 1]
                    dz = atoms[s, i + 1, second, 2] - atoms[s, i, first, 2]
                    d = np.sqrt(dx * dx + dy * dy + dz * dz + 1e-8)
                    dev = d - target
                    bonds += abs(dev)
                    sign = 1.0 if dev > 0.0 else (-1.0 if dev < 0.0 else 0.0)
                    coef = bond_scale * sign / d
                    g_atoms[s, i + 1, second, 0] += coef * dx
                    g_atoms[s, i + 1, second, 1] += coef * dy
                    g_atoms[s, i + 1, second, 2] += coef * dz
                    g_atoms[s, i, first, 0] -= coef * dx
                    g_atoms[s, i, first, 1] -= coef * dy
                    g_atoms[s, i, first, 2] -= coef * dz
            energy[s] = restraint[s] * inv_len + clash_weight * clash[s] * inv_len + bond_scale * bonds
            for i in range(length):
                # CB = a (b x c) + b' b + c' c + CA with b = CA - N, c = C - CA
                gx, gy, gz = g_cb[s, i, 0] * inv_len, g_cb[s, i, 1] * inv_len, g_cb[s, i, 2] * inv_len
                bx, by, bz = b_vec[s, i, 0], b_vec[s, i, 1], b_vec[s, i, 2]
                cx, cy, cz = c_vec[s, i, 0], c_vec[s, i, 1], c_vec[s, i, 2]
                # d/db of g . (b x c) = c x g; d/dc = g x b
                db0 = ca_a * (cy * gz - cz * gy) + ca_b * gx
                db1 = ca_a * (cz * gx - cx * gz) + ca_b * gy
                db2 = ca_a * (cx * gy - cy * gx) + ca_b * gz
                dc0 = ca_a * (gy * bz - gz * by) + ca_c * gx
                dc1 = ca_a * (gz * bx - gx * bz) + ca_c * gy
                dc2 = ca_a * (gx * by - gy * bx) + ca_c * gz
                g_atoms[s, i, 0, 0] -= db0
                g_atoms[s, i, 0, 1] -= db1
                g_atoms[s, i, 0, 2] -= db2
                g_atoms[s, i, 1, 0] += gx + db0 - dc0 + clash_weight * g_ca[s, i, 0] * inv_len
                g_atoms[s, i, 1, 1] += gy + db1 - dc1 + clash_weight * g_ca[s, i, 1] * inv_len
                g_atoms[s, i, 1, 2] += gz + db2 - dc2 + clash_weight * g_ca[s, i, 2] * inv_len
                g_atoms[s, i, 2, 0] += dc0
                g_atoms[s, i, 2, 1] += dc1
                g_atoms[s, i, 2, 2] += dc2
        g_trans = np.zeros((n_starts, length, 3))
        g_quat = np.zeros((n_starts, length, 4))
        g_rot = np.zeros((3, 3))
        for s in range(n_starts):
            for i in range(length):
                # atom = R ideal + t: dE/dt = sum of the atoms' gradients, dE/dR_kl = sum_a g_ak ideal_al
                for k in range(3):
                    g_trans[s, i, k] = g_atoms[s, i, 0, k] + g_atoms[s, i, 1, k] + g_atoms[s, i, 2, k]
                    for m in range(3):
                        g_rot[k, m] = (g_atoms[s, i, 0, k] * ideal[0, m] + g_atoms[s, i, 1, k] * ideal[1, m]
                                       + g_atoms[s, i, 2, k] * ideal[2, m])
                w_, x, y, z = qhat[s, i, 0], qhat[s, i, 1], qhat[s, i, 2], qhat[s, i, 3]
                gw = 2 * (-z * g_rot[0, 1] + y * g_rot[0, 2] + z * g_rot[1, 0] - x * g_rot[1, 2]
                          - y * g_rot[2, 0] + x * g_rot[2, 1])
                gx_ = 2 * (y * g_rot[0, 1] + z * g_rot[0, 2] + y * g_rot[1, 0] - 2 * x * g_rot[1, 1]
                           - w_ * g_rot[1, 2] + z * g_rot[2, 0] + w_ * g_rot[2, 1] - 2 * x * g_rot[2, 2])
                gy_ = 2 * (-2 * y * g_rot[0, 0] + x * g_rot[0, 1] + w_ * g_rot[0, 2] + x * g_rot[1, 0]
                           + z * g_rot[1, 2] - w_ * g_rot[2, 0] + z * g_rot[2, 1] - 2 * y * g_rot[2, 2])
                gz_ = 2 * (-2 * z * g_rot[0, 0] - w_ * g_rot[0, 1] + x * g_rot[0, 2] + w_ * g_rot[1, 0]
                           - 2 * z * g_rot[1, 1] + y * g_rot[1, 2] + x * g_rot[2, 0] + y * g_rot[2, 1])
                # through the normalisation q / |q|: (g - qhat (qhat . g)) / |q|
                dot = w_ * gw + x * gx_ + y * gy_ + z * gz_
                r = norm[s, i]
                g_quat[s, i, 0] = (gw - w_ * dot) / r
                g_quat[s, i, 1] = (gx_ - x * dot) / r
                g_quat[s, i, 2] = (gy_ - y * dot) / r
                g_quat[s, i, 3] = (gz_ - z * dot) / r
        return energy, g_trans, g_quat

    return restraints, clashes, chain_energy


class ChainEnergy(torch.autograd.Function):
    """Per-start fold energies ``[S]`` of frames ``trans [S, L, 3]``, ``quat [S, L, 4]`` (the distance restraints,
    the clash and the chain terms of :func:`workflow_lib.inference.fold.fold_from_distogram` without orientation
    restraints), the whole energy and its gradient in one compiled call: at 100 residues the torch graph of the
    frames, atoms, Cβ and chain terms costs more per minimisation step than the restraints themselves."""

    @staticmethod
    def forward(ctx, trans: torch.Tensor, quat: torch.Tensor, pairs: tuple, cut: float, bond_weight: float,
                clash_weight: float):
        _, _, chain_energy = _kernels()
        energy, g_trans, g_quat = chain_energy(
            trans.detach().double().numpy(), quat.detach().double().numpy(), _IDEAL, _CB_ABC, *pairs, float(cut),
            float(bond_weight), float(clash_weight), PEPTIDE_BOND, CA_CA_TRANS)
        ctx.save_for_backward(torch.from_numpy(g_trans).to(trans.dtype), torch.from_numpy(g_quat).to(quat.dtype))
        return torch.from_numpy(energy).to(trans.dtype)

    @staticmethod
    def backward(ctx, grad_energy: torch.Tensor):
        """The saved per-start gradients scaled by the incoming ones; none for the tables and the settings."""
        g_trans, g_quat = ctx.saved_tensors
        scale = grad_energy[:, None, None]
        return scale * g_trans, scale * g_quat, None, None, None, None


class CompiledTerms(torch.autograd.Function):
    """``(restraint energies [S], clash sums [S])`` of ``cb [S, L, 3]`` and ``ca [S, L, 3]`` (module doc), with
    the gradients computed in the forward pass."""

    @staticmethod
    def forward(ctx, cb: torch.Tensor, ca: torch.Tensor, pairs: tuple, cut: float):
        """Both terms and their gradients in one call of each kernel (``pairs``: :func:`pair_tables`)."""
        restraints, clashes, _ = _kernels()
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


@lru_cache(maxsize=None)
def _anchor_kernel():
    numba = numba_module()

    @numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
    def anchors(ca, pair_i, pair_j, target, weight, scale):
        """Per-start energies ``[S]`` of ``Σ w log(1 + ((d − target) / scale)²)`` over the pairs and their
        gradients ``[S, L, 3]`` with respect to ``ca [S, L, 3]``."""
        n_starts = ca.shape[0]
        energy = np.zeros(n_starts)
        grad = np.zeros_like(ca)
        inv = 1.0 / (scale * scale)
        for s in range(n_starts):
            total = 0.0
            for p in range(pair_i.shape[0]):
                i, j = pair_i[p], pair_j[p]
                dx = ca[s, i, 0] - ca[s, j, 0]
                dy = ca[s, i, 1] - ca[s, j, 1]
                dz = ca[s, i, 2] - ca[s, j, 2]
                d = np.sqrt(dx * dx + dy * dy + dz * dz)
                x = d - target[p]
                q = x * x * inv
                total += weight[p] * np.log1p(q)
                if d > 1e-9:
                    g = weight[p] * 2.0 * x * inv / (1.0 + q) / d
                    grad[s, i, 0] += g * dx
                    grad[s, i, 1] += g * dy
                    grad[s, i, 2] += g * dz
                    grad[s, j, 0] -= g * dx
                    grad[s, j, 1] -= g * dy
                    grad[s, j, 2] -= g * dz
            energy[s] = total
        return energy, grad

    return anchors


class AnchorEnergy(torch.autograd.Function):
    """Per-start anchor energies ``[S]`` of Cα positions ``ca [S, L, 3]``
    (:class:`workflow_lib.inference.fold.CaAnchors`), with the gradient computed in the forward pass."""

    @staticmethod
    def forward(ctx, ca: torch.Tensor, pair_i: np.ndarray, pair_j: np.ndarray, target: np.ndarray,
                weight: np.ndarray, scale: float):
        energy, grad = _anchor_kernel()(ca.detach().double().numpy(), pair_i, pair_j, target, weight, float(scale))
        ctx.save_for_backward(torch.from_numpy(grad).to(ca.dtype))
        return torch.from_numpy(energy).to(ca.dtype)

    @staticmethod
    def backward(ctx, grad_energy: torch.Tensor):
        (grad,) = ctx.saved_tensors
        return grad_energy[:, None, None] * grad, None, None, None, None, None
