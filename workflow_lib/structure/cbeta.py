"""Ideal backbone atoms built from N, CA, C: the virtual Cβ and the carbonyl oxygen.

In the 6D representation of trRosetta and RoseTTAFold (Yang et al. 2020, PNAS 117:1496; Baek et al. 2021,
Science 373:871) every pair feature is measured from Cβ, which all amino acids except glycine have; RoseTTAFold
(like trRosetta) uses a *virtual* Cβ built from the backbone so that glycine, residues with a missing side chain,
and predicted backbones (N, CA, C only) all get one.

The virtual Cβ uses the trRosetta constants (Yang et al. 2020, ``get_coords6d``)::

    b = CA - N,   c = C - CA,   a = b × c
    CB = -0.58273431 a + 0.56802827 b - 0.54067466 c + CA

which puts Cβ 1.52 Å from CA at ideal tetrahedral geometry on the L-amino-acid side.

All functions take ``[*, 3]`` arrays (any leading shape, broadcasting) and return float64 unless the input is
float32 (dtype follows NumPy promotion). NaN in, NaN out: a residue without one of its input atoms gets NaN.
"""

from __future__ import annotations

import numpy as np

CB_A = -0.58273431
CB_B = 0.56802827
CB_C = -0.54067466
"""trRosetta's coefficients for the virtual Cβ (see module docstring)."""

C_O_BOND = 1.231
"""Carbonyl C=O bond length in Å (Engh & Huber 1991)."""
CA_C_O_ANGLE = np.deg2rad(120.8)
"""CA-C-O bond angle (Engh & Huber 1991)."""
PEPTIDE_BOND_MAX = 2.0
"""A C(i)–N(i+1) distance above this (Å) is not a peptide bond (the ideal bond is 1.33 Å)."""
TERMINAL_N_CA_C_O = np.pi
"""N-CA-C-O torsion used for the oxygen when no bonded next N exists (chain end or break).

The true value follows ψ (O is trans to N(i+1)), which is unknown there; π is a placeholder that keeps the
oxygen in a chemically sensible place (the exact choice only affects the last residue of a segment).
"""


def virtual_cb(n: np.ndarray, ca: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Ideal Cβ ``[*, 3]`` from backbone ``n``, ``ca``, ``c`` ``[*, 3]`` (trRosetta constants)."""
    n, ca, c = (np.asarray(x) for x in (n, ca, c))
    b = ca - n
    cc = c - ca
    a = np.cross(b, cc)
    return CB_A * a + CB_B * b + CB_C * cc + ca


def fill_cb(n: np.ndarray, ca: np.ndarray, c: np.ndarray, cb: np.ndarray | None = None) -> np.ndarray:
    """Cβ ``[*, 3]``: the given ``cb`` where it is finite, the virtual Cβ elsewhere (glycine, missing atoms).

    With ``cb=None`` every residue gets the virtual Cβ (the trRosetta/RoseTTAFold convention).
    """
    virtual = virtual_cb(n, ca, c)
    if cb is None:
        return virtual
    cb = np.asarray(cb)
    if cb.shape != virtual.shape:
        raise ValueError(f"cb has shape {cb.shape}, expected {virtual.shape} like the backbone")
    present = np.isfinite(cb).all(axis=-1, keepdims=True)
    return np.where(present, cb, virtual)


def place_atom(a: np.ndarray, b: np.ndarray, c: np.ndarray, bond: float, angle: float | np.ndarray,
               torsion: float | np.ndarray) -> np.ndarray:
    """Natural-extension reference frame (NeRF): the point d ``[*, 3]`` with |c-d| = ``bond``,
    angle b-c-d = ``angle`` and torsion a-b-c-d = ``torsion`` (radians, IUPAC sign as :func:`dihedral`).
    """
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    bc = c - b
    bc = bc / np.linalg.norm(bc, axis=-1, keepdims=True)
    normal = np.cross(b - a, bc)
    normal = normal / np.linalg.norm(normal, axis=-1, keepdims=True)
    m = np.stack([bc, np.cross(normal, bc), normal], axis=-1)  # columns: local x, y, z
    local = np.stack(np.broadcast_arrays(-bond * np.cos(angle), bond * np.sin(angle) * np.cos(torsion),
                                         bond * np.sin(angle) * np.sin(torsion)), axis=-1)
    return c + np.einsum("...ij,...j->...i", m, local)


def ideal_oxygen(n: np.ndarray, ca: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Carbonyl O ``[L, 3]`` for one chain from its ``n``, ``ca``, ``c`` ``[L, 3]``.

    The peptide unit is planar and O is trans to N(i+1), so O(i) is placed with torsion
    N(i+1)-CA(i)-C(i)-O(i) = 180°, CA-C-O = 120.8° and C=O = 1.231 Å. Where residue i has no bonded
    successor (last residue, missing N(i+1), or C(i)–N(i+1) > 2 Å) the torsion N(i)-CA(i)-C(i)-O(i) =
    :data:`TERMINAL_N_CA_C_O` is used instead.
    """
    n, ca, c = (np.asarray(x, dtype=np.float64) for x in (n, ca, c))
    if n.ndim != 2 or n.shape[-1] != 3 or ca.shape != n.shape or c.shape != n.shape:
        raise ValueError(f"ideal_oxygen expects three [L, 3] arrays, got {n.shape}, {ca.shape}, {c.shape}")
    next_n = np.full_like(n, np.nan)
    next_n[:-1] = n[1:]
    bonded = np.linalg.norm(next_n - c, axis=-1) <= PEPTIDE_BOND_MAX  # False for NaN
    with np.errstate(invalid="ignore", divide="ignore"):
        from_next = place_atom(next_n, ca, c, C_O_BOND, CA_C_O_ANGLE, np.pi)
        from_self = place_atom(n, ca, c, C_O_BOND, CA_C_O_ANGLE, TERMINAL_N_CA_C_O)
    return np.where(bonded[:, None], from_next, from_self)
