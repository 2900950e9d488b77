"""The report pages' figures, alignment text, superposition and shipped viewer (workflow_lib.report.figures,
.protein_view, .vendor), on real data where data is involved."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pandas as pd
import pytest
from matplotlib import image as mpimg

from workflow_lib.errors import InputError
from workflow_lib.report import vendor
from workflow_lib.report.figures import (alignment_lines, coverage_matrix, distance_map_image, msa_coverage_svg,
                                         msa_identity_image, png_bytes)
from workflow_lib.report.protein_view import TopTemplate, superposed_template_pdb, template_contacts
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.structure.metrics import kabsch_rmsd
from workflow_lib.templates.database import TemplateStructure
from workflow_lib.templates.search import positive_pairs


def test_png_encoder_round_trips_every_pixel():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(7, 13, 3), dtype=np.uint8)
    decoded = mpimg.imread(io.BytesIO(png_bytes(image)), format="png")
    assert decoded.shape == (7, 13, 3)
    assert np.array_equal((decoded * 255).round().astype(np.uint8), image)
    with pytest.raises(ValueError, match="non-empty"):
        png_bytes(np.zeros((0, 4, 3), np.uint8))


def test_msa_image_sorts_by_identity_and_whitens_gaps(data_dir):
    alignment = read_a3m(data_dir / "formats" / "t1078_ss2.a3m")
    values, coverage = coverage_matrix(alignment)
    rgb, image_coverage, rows = msa_identity_image(alignment, max_rows=50)
    assert rows == alignment.depth and rgb.shape == (50, alignment.length, 3)
    assert np.array_equal(image_coverage, coverage)
    # the query (identity 1) is the first row; the subsampled rows keep the identity order
    assert np.all(values[0] == 1.0)
    first = np.nanmax(values, axis=1)
    assert np.all(np.diff(first[np.isfinite(first)]) <= 1e-12)
    picked = values[np.linspace(0, len(values) - 1, 50).round().astype(int)]
    assert np.array_equal(np.all(rgb == 255, axis=-1), np.isnan(picked))
    svg = msa_coverage_svg(alignment)
    assert svg.startswith("<svg") and "data:image/png;base64," in svg and svg.endswith("</svg>")


def test_alignment_lines_follow_the_state_string():
    positive = positive_pairs()
    top, middle, bottom = alignment_lines("MKVLA", "MRVWTA", "MMIMJM", 0, 0, positive)
    # M: M/M, M: K/R (similar), I: V/-, M: L/V, J: -/W, M: A/T
    assert top == "MKVL-A" and bottom == "MR-VWT"
    assert middle[0] == "|" and middle[1] == "+" and middle[2] == " " and middle[4] == " "
    leucine, valine = encode("LV")
    assert middle[3] == ("+" if positive[leucine, valine] else " ")
    with pytest.raises(ValueError, match="unknown alignment state"):
        alignment_lines("MK", "MK", "MX", 0, 0, positive)


def test_distance_map_puts_prediction_above_and_template_below_the_diagonal():
    length = 30
    upper = np.zeros((length, length))
    upper[2, 20] = upper[20, 2] = 1.0
    lower = np.full((length, length), np.nan)
    lower[25, 5] = lower[5, 25] = 1.0
    lower[10, 4] = lower[4, 10] = 0.0
    rgb = distance_map_image(upper, lower)
    assert rgb[2, 20].tolist() == [0, 0, 0]            # probability 1 in Greys: black
    assert rgb[25, 5].tolist() == [230, 120, 30]       # a template contact
    assert rgb[10, 4].tolist() == [236, 236, 236]      # aligned, no contact
    assert rgb[20, 2].tolist() == [255, 255, 255]      # below the diagonal, no template residue: white
    pooled = distance_map_image(np.zeros((1300, 1300)), None, size=600)
    assert pooled.shape == (434, 434, 3)               # ceil(1300 / 3) pixels a side


def test_template_superposed_on_itself_lands_on_the_model(data_dir):
    """A template aligned to a model of the same coordinates, moved by a rotation and a shift, is put back
    exactly (Kabsch over the aligned Cα), and its contact map is symmetric with NaN outside the alignment."""
    from workflow_lib.structure.parse import read_structure

    chain = read_structure(data_dir / "evaluate" / "2q2k_A.pdb")[0]
    coords = np.concatenate([chain.coords, chain.cb[:, None]], axis=1).astype(np.float32)   # N, CA, C, O, CB
    length = len(coords)
    angle = 0.7
    rotation = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
    moved = coords @ rotation.T + np.array([10.0, -4.0, 3.0])
    structure = TemplateStructure("2q2k_A", chain.sequence, moved.astype(np.float32),
                                  np.isfinite(moved).all(-1), np.arange(length, dtype=np.int32), "-" * length)
    aligned = np.stack([np.arange(5, length), np.arange(5, length)], axis=1).astype(np.int32)
    template = TopTemplate(pd.Series({"template": "2q2k_A"}), structure, tuple(str(i + 1) for i in range(length)),
                           chain.sequence, aligned)
    text = superposed_template_pdb(template, coords[:, 1])
    ca = np.array([[float(line[30:38]), float(line[38:46]), float(line[46:54])]
                   for line in text.splitlines() if line.startswith("ATOM") and line[12:16] == " CA "])
    assert ca.shape == (length, 3)
    assert kabsch_rmsd(ca, coords[:, 1]) < 0.01 and np.abs(ca - coords[:, 1]).max() < 0.01
    contacts = template_contacts(template, length)
    assert np.isnan(contacts[:5]).all() and np.isfinite(contacts[5:, 5:]).all()
    assert np.array_equal(contacts[5:, 5:], contacts[5:, 5:].T) and contacts[5:, 5:].sum() > length


def test_shipped_viewer_is_the_recorded_npm_release(tmp_path, monkeypatch):
    vendor.verify_assets()
    record = vendor.vendored()[vendor.VIEWER_JS]
    assert record["package"] == "3dmol" and record["integrity"].startswith("sha512-")
    target = vendor.copy_assets(tmp_path / "report")
    assert sorted(p.name for p in target.iterdir()) == sorted([vendor.VIEWER_JS, vendor.VIEWER_LICENSE,
                                                               *vendor.OWN_ASSETS])
    # an edited copy is refused with the file named
    edited = tmp_path / "assets"
    shutil.copytree(vendor.ASSETS, edited)
    (edited / vendor.VIEWER_JS).write_text("// not the viewer\n")
    monkeypatch.setattr(vendor, "ASSETS", edited)
    with pytest.raises(InputError, match="3Dmol-min.js.*differs from 3dmol"):
        vendor.verify_assets()
