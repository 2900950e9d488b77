"""6D pair geometry (trRosetta, Yang et al. 2020): primitives, maps and bins."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from Bio.PDB.vectors import Vector, calc_angle, calc_dihedral

from workflow_lib.structure import geometry as g
from workflow_lib.structure import read_chain, virtual_cb

DATA = Path(__file__).parent / "data" / "structure"


# --- primitives -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("d", "expected"), [
    ((0.0, 1.0, 1.0), 90.0),     # rear bond rotated clockwise seen along B→C: positive (IUPAC)
    ((0.0, -1.0, 1.0), -90.0),
    ((-1.0, 0.0, 1.0), 180.0),   # trans
    ((1.0, 0.0, 1.0), 0.0),      # cis
])
def test_dihedral_hand_cases(d, expected):
    a, b, c = (1.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0)
    angle = np.degrees(g.dihedral(np.array(a), np.array(b), np.array(c), np.array(d)))
    assert abs(abs(angle) - 180.0) < 1e-9 if expected == 180.0 else angle == pytest.approx(expected, abs=1e-9)


def test_dihedral_sign_flips_in_a_mirror_and_matches_biopython():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(200, 4, 3))
    ours = g.dihedral(points[:, 0], points[:, 1], points[:, 2], points[:, 3])
    reference = [calc_dihedral(*(Vector(*p) for p in quad)) for quad in points]
    np.testing.assert_allclose(ours, reference, atol=1e-10)
    mirrored = points * np.array([1.0, 1.0, -1.0])
    np.testing.assert_allclose(g.dihedral(*(mirrored[:, k] for k in range(4))), -ours, atol=1e-10)
    # reversing the four points leaves the dihedral unchanged (why ω is symmetric)
    np.testing.assert_allclose(g.dihedral(points[:, 3], points[:, 2], points[:, 1], points[:, 0]), ours, atol=1e-10)


def test_planar_angle_hand_cases_and_biopython():
    o = np.zeros(3)
    assert np.degrees(g.planar_angle(np.array([1.0, 0, 0]), o, np.array([0, 2.0, 0]))) == pytest.approx(90.0)
    assert np.degrees(g.planar_angle(np.array([1.0, 0, 0]), o, np.array([-3.0, 0, 0]))) == pytest.approx(180.0)
    assert np.degrees(g.planar_angle(np.array([1.0, 0, 0]), o, np.array([1.0, 1.0, 0]))) == pytest.approx(45.0)
    rng = np.random.default_rng(1)
    points = rng.normal(size=(100, 3, 3))
    reference = [calc_angle(*(Vector(*p) for p in triple)) for triple in points]
    np.testing.assert_allclose(g.planar_angle(points[:, 0], points[:, 1], points[:, 2]), reference, atol=1e-10)


def test_primitives_give_nan_for_missing_or_degenerate_points():
    a, b, c, d = np.eye(3)[0], np.zeros(3), np.eye(3)[2], np.array([0.0, 1, 1])
    assert np.isnan(g.dihedral(a, b, c, np.full(3, np.nan)))
    assert np.isnan(g.dihedral(a, b, b, d))           # zero-length central bond
    assert np.isnan(g.dihedral(c * 2, b, c, d))       # A on the B–C axis
    assert np.isnan(g.planar_angle(a, b, b))


# --- the 6D maps on real chains -------------------------------------------------------------------------------

def _loop_reference(n, ca, cb):
    """Per-pair Biopython computation, independent of the vectorised code."""
    length = len(ca)
    out = {key: np.full((length, length), np.nan) for key in ("dist", "omega", "theta", "phi")}
    v = lambda x: Vector(*map(float, x))  # noqa: E731
    for i in range(length):
        for j in range(length):
            out["dist"][i, j] = np.linalg.norm(cb[i] - cb[j])
            if i == j:
                continue
            out["omega"][i, j] = calc_dihedral(v(ca[i]), v(cb[i]), v(cb[j]), v(ca[j]))
            out["theta"][i, j] = calc_dihedral(v(n[i]), v(ca[i]), v(cb[i]), v(cb[j]))
            out["phi"][i, j] = calc_angle(v(ca[i]), v(cb[i]), v(cb[j]))
    return out


def test_pair_geometry_matches_a_per_pair_loop_on_a_real_chain():
    chain = read_chain(DATA / "3BP8_l_u.pdb", "A")  # 75 residues, real Cβ where present
    n, ca, c = (x.astype(np.float64) for x in (chain.n, chain.ca, chain.c))
    cb = np.where(np.isfinite(chain.cb), chain.cb, virtual_cb(n, ca, c))
    ours = g.pair_geometry(n, ca, c, chain.cb)
    reference = _loop_reference(n, ca, cb)
    for key in ("dist", "omega", "theta", "phi"):
        assert ours[key].dtype == np.float32 and ours[key].shape == (75, 75)
        np.testing.assert_allclose(ours[key], reference[key], atol=2e-5, equal_nan=True, err_msg=key)


def test_symmetry_omega_symmetric_theta_phi_not():
    chain = read_chain(DATA / "2OOB_r_u.pdb", "A")
    geo = g.pair_geometry(chain.n, chain.ca, chain.c)
    np.testing.assert_allclose(geo["dist"], geo["dist"].T, atol=1e-5)
    np.testing.assert_allclose(geo["omega"], geo["omega"].T, atol=1e-5, equal_nan=True)
    off = ~np.eye(len(chain), dtype=bool)
    assert np.nanmax(np.abs(geo["theta"] - geo["theta"].T)[off]) > 1.0
    assert np.nanmax(np.abs(geo["phi"] - geo["phi"].T)[off]) > 1.0
    assert np.all(np.diag(geo["dist"]) == 0) and np.isnan(np.diag(geo["omega"])).all()
    assert np.nanmin(geo["phi"]) >= 0 and np.nanmax(geo["phi"]) <= np.pi


def test_pair_geometry_is_invariant_to_rigid_motion_and_mirror_flips_dihedrals():
    chain = read_chain(DATA / "2OOB_r_u.pdb", "A")
    n, ca, c = (x.astype(np.float64) for x in (chain.n, chain.ca, chain.c))
    q, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))  # proper rotation
    shift = np.array([10.0, -4.0, 7.0])
    moved = g.pair_geometry(n @ q.T + shift, ca @ q.T + shift, c @ q.T + shift)
    base = g.pair_geometry(n, ca, c)
    for key in base:
        np.testing.assert_allclose(moved[key], base[key], atol=1e-4, equal_nan=True)
    # in a mirror image distances and φ stay and ω, θ change sign; Cβ is mirrored with the backbone (building
    # it from the mirrored N, CA, C would put it on the D-amino-acid side)
    m = np.array([1.0, 1.0, -1.0])
    mirrored_cb = virtual_cb(n, ca, c) * m
    mirror = g.pair_geometry(n * m, ca * m, c * m, mirrored_cb)
    np.testing.assert_allclose(mirror["dist"], base["dist"], atol=1e-4)
    np.testing.assert_allclose(mirror["phi"], base["phi"], atol=1e-4, equal_nan=True)
    np.testing.assert_allclose(mirror["omega"], -base["omega"], atol=1e-4, equal_nan=True)
    np.testing.assert_allclose(mirror["theta"], -base["theta"], atol=1e-4, equal_nan=True)


def test_missing_atoms_give_nan_only_where_needed():
    chain = read_chain(DATA / "1ACB_l_u.pdb.gz", "")  # residue 0 (THR 1) has no N, but a real Cβ
    assert not chain.mask[0, 0]
    geo = g.pair_geometry(chain.n, chain.ca, chain.c, chain.cb)
    assert np.isnan(geo["theta"][0, 1:]).all()        # θ_0j needs N_0
    assert np.isfinite(geo["theta"][1:, 0]).all()     # θ_i0 does not
    assert np.isfinite(geo["dist"][0]).all()          # the file's Cβ is there
    virtual = g.pair_geometry(chain.n, chain.ca, chain.c)  # virtual Cβ needs N
    assert np.isnan(virtual["dist"][0, 1:]).all() and np.isnan(virtual["omega"][1:, 0]).all()


def test_real_alpha_helix_ca_distances():
    # myoglobin-like globin d1mbaa_ residues 21-35: one DSSP H segment (mkdssp 4.2.2)
    ca = read_chain(DATA / "d1mbaa_.pdb.gz", "A").ca[20:35].astype(np.float64)
    d3 = np.linalg.norm(ca[3:] - ca[:-3], axis=1)
    d4 = np.linalg.norm(ca[4:] - ca[:-4], axis=1)
    assert 5.0 <= d3.mean() <= 5.4 and 4.8 <= d3.min() and d3.max() <= 5.6
    assert 6.0 <= d4.mean() <= 6.4 and 5.4 <= d4.min() and d4.max() <= 6.7


def test_pair_geometry_rejects_bad_shapes():
    with pytest.raises(ValueError, match="shape"):
        g.pair_geometry(np.zeros((4, 3)), np.zeros((4, 3)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="residues"):
        g.pair_geometry(np.zeros((4, 3)), np.zeros((5, 3)), np.zeros((4, 3)))


# --- bins -------------------------------------------------------------------------------------------------------

def test_bin_constants_and_edges():
    assert (g.DIST_BINS, g.OMEGA_BINS, g.THETA_BINS, g.PHI_BINS) == (37, 37, 37, 19)
    assert (g.NO_CONTACT_DIST, g.NO_CONTACT_OMEGA, g.NO_CONTACT_THETA, g.NO_CONTACT_PHI) == (36, 36, 36, 18)
    np.testing.assert_allclose(np.diff(g.DIST_EDGES), 0.5)
    np.testing.assert_allclose(np.diff(g.ANGLE_EDGES), np.pi / 18)
    np.testing.assert_allclose(np.diff(g.PHI_EDGES), np.pi / 18)
    assert g.DIST_CENTERS[0] == pytest.approx(2.25) and len(g.PHI_CENTERS) == 18


def _maps(dist, omega=0.0, theta=0.0, phi=0.5):
    """2×2 maps whose off-diagonal entries carry the given values."""
    def square(v):
        m = np.full((2, 2), np.nan)
        m[0, 1] = m[1, 0] = v
        return m
    return {"dist": square(dist), "omega": square(omega), "theta": square(theta), "phi": square(phi)}


@pytest.mark.parametrize(("d", "expected"), [(1.0, 0), (2.0, 0), (2.49, 0), (2.5, 1), (7.9, 11), (19.99, 35),
                                             (20.0, 36), (35.0, 36), (np.nan, 36)])
def test_distance_bins_edges(d, expected):
    bins = g.bin_pair_geometry(_maps(d))
    assert bins["dist"][0, 1] == expected
    assert bins["dist"][0, 0] == g.NO_CONTACT_DIST  # the diagonal is never a contact
    if expected == 36:
        assert bins["omega"][0, 1] == 36 and bins["theta"][0, 1] == 36 and bins["phi"][0, 1] == 18


@pytest.mark.parametrize(("angle", "expected"), [(-np.pi, 0), (np.pi, 0), (np.pi - 1e-6, 35), (0.0, 18),
                                                 (-1e-6, 17), (np.nan, 36)])
def test_dihedral_bins_edges(angle, expected):
    bins = g.bin_pair_geometry(_maps(5.0, omega=angle, theta=angle))
    assert bins["omega"][0, 1] == expected and bins["theta"][0, 1] == expected


@pytest.mark.parametrize(("angle", "expected"), [(0.0, 0), (np.pi / 18 - 1e-6, 0), (np.pi / 18 + 1e-6, 1),
                                                 (np.pi, 17), (np.nan, 18)])
def test_planar_bins_edges(angle, expected):
    assert g.bin_pair_geometry(_maps(5.0, phi=angle))["phi"][0, 1] == expected


def test_bins_match_a_digitize_reference_on_a_real_chain():
    chain = read_chain(DATA / "d1mbaa_.pdb.gz", "A")
    geo = g.pair_geometry(chain.n, chain.ca, chain.c)
    bins = g.bin_pair_geometry(geo)
    # RoseTTAFold-style reference: np.digitize against the inner edges, no-contact last
    d = geo["dist"].astype(np.float64)
    contact = (d < 20.0) & ~np.eye(len(chain), dtype=bool)
    ref_d = np.where(contact, np.digitize(d, g.DIST_EDGES[1:-1]), 36)
    ref_o = np.where(contact, np.digitize(geo["omega"], g.ANGLE_EDGES[1:-1]), 36)
    ref_p = np.where(contact, np.digitize(geo["phi"], g.PHI_EDGES[1:-1]), 18)
    np.testing.assert_array_equal(bins["dist"], ref_d)
    np.testing.assert_array_equal(bins["omega"], ref_o)
    np.testing.assert_array_equal(bins["phi"], ref_p)
    assert all(b.dtype == np.uint8 for b in bins.values())
    assert 0 < contact.mean() < 1


def test_cb_distance_bins_are_the_6d_distance_bins_on_a_real_chain():
    """With the file's Cβ (NaN on glycines and a removed one: the virtual Cβ fills them) and without it."""
    chain = read_chain(DATA / "d1mbaa_.pdb.gz", "A")
    cb = np.array(chain.cb, dtype=np.float64)
    cb[5] = np.nan
    for given in (cb, None):
        expected = g.bin_pair_geometry(g.pair_geometry(chain.n, chain.ca, chain.c, given))["dist"]
        got = g.cb_distance_bins(chain.n, chain.ca, chain.c, given)
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, expected)


def test_bin_pair_geometry_rejects_bad_input():
    with pytest.raises(ValueError, match="lacks"):
        g.bin_pair_geometry({"dist": np.zeros((2, 2))})
    maps = _maps(5.0)
    maps["phi"] = np.zeros((3, 3))
    with pytest.raises(ValueError, match="phi"):
        g.bin_pair_geometry(maps)
