"""The 6D inter-residue geometry (d, ω, θ, φ) of RoseTTAFold/trRosetta and its discretisation into bins.

Yang et al. 2020 (trRosetta, PNAS 117:1496), as RoseTTAFold uses it (Baek et al. 2021, Science 373:871). For
every ordered pair (i, j):

- ``dist``  d_ij = |Cβ_i − Cβ_j| (Å), symmetric;
- ``omega`` ω_ij = dihedral(CA_i, Cβ_i, Cβ_j, CA_j) ∈ [−π, π], symmetric (ω_ij = ω_ji);
- ``theta`` θ_ij = dihedral(N_i, CA_i, Cβ_i, Cβ_j) ∈ [−π, π], asymmetric;
- ``phi``   φ_ij = planar angle(CA_i, Cβ_i, Cβ_j) ∈ [0, π], asymmetric.

Dihedral sign (IUPAC; the sign is the direction of rotation around the central vector pointing from B
to C): sin ω ∝ b₁ · (n₁ × n₂) with n₁ = b₀ × b₁, n₂ = b₁ × b₂. For A=(1,0,0), B=(0,0,0), C=(0,0,1),
D=(0,1,1) the dihedral is +90°.

Bins (:func:`bin_pair_geometry`), the RoseTTAFold ``c6d_to_bins`` convention with "no contact" as the LAST class:

======  =======  ===============================================  ==================================
key     classes  real bins (index k = 0 .. n−1)                   no-contact index (last)
======  =======  ===============================================  ==================================
dist    37       36 bins of 0.5 Å: k covers [2 + 0.5k, 2.5 + 0.5k);   36: d ≥ 20 Å, d missing, or i = j
                 d < 2 Å is put in bin 0
omega   37       36 bins of 10°: k covers [−π + kπ/18, −π + (k+1)π/18);  36: whenever dist is no-contact
                 ω = +π is the same angle as −π and goes to bin 0   or the angle is missing
theta   37       as omega                                         36
phi     19       18 bins of 10°: k covers [kπ/18, (k+1)π/18); φ = π   18
                 is put in bin 17
======  =======  ===============================================  ==================================

(trRosetta's own npz files put "no contact" at index 0 instead; RoseTTAFold's training code, which the model
of this project follows, puts it last. Use the ``NO_CONTACT_*`` constants rather than literal indices.)

Everything is vectorised NumPy over ``[L, L]`` (memory O(L²·3) float64); no Python loops over pairs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from workflow_lib.structure.cbeta import fill_cb

DIST_MIN = 2.0
DIST_MAX = 20.0
"""Contact range in Å: pairs with d ≥ DIST_MAX are "no contact"."""
DIST_BINS = 37
OMEGA_BINS = 37
THETA_BINS = 37
PHI_BINS = 19
"""Number of classes per feature, the no-contact class included."""
NO_CONTACT_DIST = DIST_BINS - 1
NO_CONTACT_OMEGA = OMEGA_BINS - 1
NO_CONTACT_THETA = THETA_BINS - 1
NO_CONTACT_PHI = PHI_BINS - 1
"""Index of the no-contact class (the last one) per feature."""

DIST_EDGES = np.linspace(DIST_MIN, DIST_MAX, DIST_BINS)
"""37 edges of the 36 distance bins: 2.0, 2.5, ..., 20.0 Å."""
ANGLE_EDGES = np.linspace(-np.pi, np.pi, OMEGA_BINS)
"""37 edges of the 36 ω/θ bins: −π, −π + π/18, ..., π."""
PHI_EDGES = np.linspace(0.0, np.pi, PHI_BINS)
"""19 edges of the 18 φ bins: 0, π/18, ..., π."""
DIST_CENTERS = 0.5 * (DIST_EDGES[:-1] + DIST_EDGES[1:])
ANGLE_CENTERS = 0.5 * (ANGLE_EDGES[:-1] + ANGLE_EDGES[1:])
PHI_CENTERS = 0.5 * (PHI_EDGES[:-1] + PHI_EDGES[1:])
"""Bin centres of the real (contact) bins, for turning a predicted distribution back into a value."""


def _norm(x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(x * x, axis=-1))


def dihedral(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Signed dihedral angle A-B-C-D in radians, ``[*]`` from four ``[*, 3]`` arrays (broadcasting).

    Range (−π, π]; NaN where a point is missing or the angle is undefined (collinear points).
    """
    a, b, c, d = (np.asarray(x, dtype=np.float64) for x in (a, b, c, d))
    b0 = a - b
    b1 = c - b
    b2 = d - c
    with np.errstate(invalid="ignore", divide="ignore"):
        b1_len = _norm(b1)[..., None]
        b1u = b1 / b1_len
        v = b0 - np.sum(b0 * b1u, axis=-1, keepdims=True) * b1u
        w = b2 - np.sum(b2 * b1u, axis=-1, keepdims=True) * b1u
        x = np.sum(v * w, axis=-1)
        y = np.sum(np.cross(b1u, v) * w, axis=-1)
        degenerate = (_norm(v) < 1e-9) | (_norm(w) < 1e-9) | (b1_len[..., 0] < 1e-9)
    return np.where(degenerate, np.nan, np.arctan2(y, x))


def planar_angle(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Angle A-B-C at vertex B in radians ∈ [0, π], ``[*]`` from three ``[*, 3]`` arrays (broadcasting).

    NaN where a point is missing or coincides with B.
    """
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    u = a - b
    v = c - b
    with np.errstate(invalid="ignore", divide="ignore"):
        # atan2 of |u×v| and u·v is accurate near 0 and π, where arccos is not
        angle = np.arctan2(_norm(np.cross(u, v)), np.sum(u * v, axis=-1))
        degenerate = (_norm(u) < 1e-9) | (_norm(v) < 1e-9)
    return np.where(degenerate, np.nan, angle)


def _check_backbone(n: np.ndarray, ca: np.ndarray, c: np.ndarray, cb: np.ndarray | None) -> None:
    for label, array in (("n", n), ("ca", ca), ("c", c)) + ((("cb", cb),) if cb is not None else ()):
        if array.ndim != 2 or array.shape[1] != 3:
            raise ValueError(f"{label} must have shape [L, 3], got {array.shape}")
        if array.shape[0] != n.shape[0]:
            raise ValueError(f"{label} has {array.shape[0]} residues, n has {n.shape[0]}")


def pair_geometry(n: np.ndarray, ca: np.ndarray, c: np.ndarray, cb: np.ndarray | None = None
                  ) -> dict[str, np.ndarray]:
    """The 6D maps of one chain (trRosetta's 6D geometry; see the module docstring).

    ``n``, ``ca``, ``c`` are ``[L, 3]`` (Å, NaN for missing atoms). ``cb`` ``[L, 3]`` is optional: with ``None``
    every residue uses the virtual Cβ built from N, CA, C (trRosetta/RoseTTAFold; use this when comparing a
    prediction, which has no side chains, with a true structure); when given, its NaN rows (glycine,
    missing atoms) are filled with the virtual Cβ.

    Returns float32 ``[L, L]`` maps ``dist``, ``omega``, ``theta``, ``phi`` (radians). NaN wherever an atom
    a value needs is missing; on the diagonal ``dist`` is 0 and the angles are NaN.
    """
    n, ca, c = (np.asarray(x, dtype=np.float64) for x in (n, ca, c))
    cb = None if cb is None else np.asarray(cb, dtype=np.float64)
    _check_backbone(n, ca, c, cb)
    cb = fill_cb(n, ca, c, cb)
    length = n.shape[0]
    cb_i, cb_j = cb[:, None, :], cb[None, :, :]
    dist = _norm(cb_j - cb_i)
    omega = dihedral(ca[:, None, :], cb_i, cb_j, ca[None, :, :])
    theta = dihedral(n[:, None, :], ca[:, None, :], cb_i, cb_j)
    phi = planar_angle(ca[:, None, :], cb_i, cb_j)
    diagonal = np.eye(length, dtype=bool)
    for angle in (omega, theta, phi):
        angle[diagonal] = np.nan
    return {"dist": dist.astype(np.float32), "omega": omega.astype(np.float32),
            "theta": theta.astype(np.float32), "phi": phi.astype(np.float32)}


def _digitize(values: np.ndarray, low: float, step: float, n_bins: int) -> np.ndarray:
    """Bin index floor((v - low) / step) clipped into 0..n_bins-1 (NaN → 0; the caller masks it)."""
    with np.errstate(invalid="ignore"):
        index = np.floor((np.nan_to_num(values, nan=low) - low) / step)
    return np.clip(index, 0, n_bins - 1).astype(np.int64)


def _distance_bins(dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The no-contact pairs (bool ``[L, L]``) and the ``dist`` class indices (uint8 ``[L, L]``) of a float64
    ``[L, L]`` distance map (:func:`bin_pair_geometry`)."""
    with np.errstate(invalid="ignore"):
        no_contact = ~(dist < DIST_MAX) | np.eye(dist.shape[0], dtype=bool)  # NaN compares False
    n_dist = DIST_BINS - 1
    dist_bins = _digitize(dist, DIST_MIN, (DIST_MAX - DIST_MIN) / n_dist, n_dist)
    dist_bins[no_contact] = NO_CONTACT_DIST
    return no_contact, dist_bins.astype(np.uint8)


def cb_distance_bins(n: np.ndarray, ca: np.ndarray, c: np.ndarray, cb: np.ndarray | None = None) -> np.ndarray:
    """uint8 ``[L, L]``: ``bin_pair_geometry(pair_geometry(n, ca, c, cb))["dist"]`` without the angles (the same
    virtual Cβ where ``cb`` is missing, the same float32 distances, the same bins), for callers that need only
    the Cβ–Cβ distance classes of a long chain."""
    n, ca, c = (np.asarray(x, dtype=np.float64) for x in (n, ca, c))
    cb = None if cb is None else np.asarray(cb, dtype=np.float64)
    _check_backbone(n, ca, c, cb)
    cb = fill_cb(n, ca, c, cb)
    dist = _norm(cb[None, :, :] - cb[:, None, :]).astype(np.float32)
    return _distance_bins(dist.astype(np.float64))[1]


def bin_pair_geometry(geometry: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Discretise the output of :func:`pair_geometry` into class indices (uint8 ``[L, L]`` each).

    Edges and the no-contact class are in the module docstring: ``dist`` 0..35 for 2–20 Å and
    :data:`NO_CONTACT_DIST` = 36; ``omega``/``theta`` 0..35 over [−π, π) and 36; ``phi`` 0..17 over [0, π] and 18.
    The angles of a pair are no-contact whenever its distance is (d ≥ 20 Å, missing, or i = j), and also when
    the angle itself is missing.
    """
    missing_keys = {"dist", "omega", "theta", "phi"} - set(geometry)
    if missing_keys:
        raise ValueError(f"geometry lacks {sorted(missing_keys)}")
    dist = np.asarray(geometry["dist"], dtype=np.float64)
    if dist.ndim != 2 or dist.shape[0] != dist.shape[1]:
        raise ValueError(f"dist must be a square [L, L] map, got {dist.shape}")
    for key in ("omega", "theta", "phi"):
        if np.shape(geometry[key]) != dist.shape:
            raise ValueError(f"{key} has shape {np.shape(geometry[key])}, dist has {dist.shape}")

    no_contact, dist_bins = _distance_bins(dist)
    out = {"dist": dist_bins}

    two_pi = 2.0 * np.pi
    for key, n_real, no_contact_index in (("omega", OMEGA_BINS - 1, NO_CONTACT_OMEGA),
                                          ("theta", THETA_BINS - 1, NO_CONTACT_THETA)):
        angle = np.asarray(geometry[key], dtype=np.float64)
        wrapped = np.mod(angle + np.pi, two_pi) - np.pi  # +π → −π, so [−π, π) covers the circle
        bins = _digitize(wrapped, -np.pi, two_pi / n_real, n_real)
        bins[no_contact | np.isnan(angle)] = no_contact_index
        out[key] = bins.astype(np.uint8)
    phi = np.asarray(geometry["phi"], dtype=np.float64)
    n_phi = PHI_BINS - 1
    phi_bins = _digitize(phi, 0.0, np.pi / n_phi, n_phi)
    phi_bins[no_contact | np.isnan(phi)] = NO_CONTACT_PHI
    out["phi"] = phi_bins.astype(np.uint8)
    return out
