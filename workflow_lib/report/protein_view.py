"""What a protein page shows beside its tables: the model in 3D coloured by pLDDT (3Dmol.js, Rego & Koes 2015),
the top template superposed on it, the template's contacts and the predicted contact map.

The template side is read back from the template hit (its state string) and the template database the hit names,
so the page shows exactly the alignment the features stage used. The template is superposed on the model by
least squares over the Cα atoms of the aligned pairs (Kabsch 1976, :func:`workflow_lib.structure.metrics.kabsch`).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.errors import InputError
from workflow_lib.structure.geometry import DIST_EDGES
from workflow_lib.structure.metrics import kabsch
from workflow_lib.structure.pdb_writer import RESIDUE_NAMES, format_pdb
from workflow_lib.templates.database import TemplateDatabase, TemplateStructure, load_template_db
from workflow_lib.templates.search import aligned_pairs

CA, CB = 1, 4
"""Atom slots of N, CA, C, O, CB coordinate arrays."""
CONTACT_CUTOFF = 8.0
"""Cβ–Cβ distance (Å) below which a pair is a contact (as in the evaluation of contact precision)."""
CONTACT_BINS = int(np.searchsorted(DIST_EDGES, CONTACT_CUTOFF))
"""Distogram bins below the cutoff (edges 2.0, 2.5, ..., 8.0 Å)."""


@dataclass(frozen=True)
class TopTemplate:
    """The rank-1 template hit of a protein, resolved against its template database."""

    hit: pd.Series
    structure: TemplateStructure
    residue_numbers: tuple[str, ...]   # author numbers of the observed residues
    observed_sequence: str             # one letter per observed residue (file order)
    pairs: np.ndarray          # int32 [K, 2]: (query column, template observed residue), both 0-based

    @property
    def name(self) -> str:
        return str(self.hit["template"])


class TemplateDatabases:
    """Template databases opened once per report (a proteome's hits name one, a user's run may name more)."""

    def __init__(self) -> None:
        self._open: dict[str, TemplateDatabase] = {}

    def get(self, path: str) -> TemplateDatabase | None:
        if path not in self._open:
            if not Path(path).is_dir():
                return None
            self._open[path] = load_template_db(path, verify=False)
        return self._open[path]

    def top_template(self, hits: pd.DataFrame) -> TopTemplate | None:
        """The best hit (rank 1) resolved to coordinates; None without hits or when its database is gone."""
        if len(hits) == 0 or "template_db" not in hits or "alignment" not in hits:
            return None
        hit = hits.sort_values(["rank", "evalue"], kind="stable").iloc[0]
        database = self.get(str(hit["template_db"]))
        if database is None:
            return None
        k = database.index(str(hit["template"]), where=str(hit["template_db"]))
        structure = database.structure(k)
        pairs = aligned_pairs(str(hit["alignment"]), int(hit["qstart"]) - 1, int(hit["tstart"]) - 1)
        observed = structure.residue_map[pairs[:, 1]] if len(pairs) else np.zeros(0, np.int32)
        keep = observed >= 0
        resolved = np.stack([pairs[keep, 0], observed[keep]], axis=1).astype(np.int32).reshape(-1, 2)
        row = database.chains.iloc[k]
        return TopTemplate(hit, structure, tuple(str(row["residue_numbers"]).split()),
                           str(row["structure_sequence"]), resolved)


def template_contacts(template: TopTemplate, length: int) -> np.ndarray:
    """float ``[L, L]``: 1 where the template residues aligned to query columns i and j have Cβ–Cβ (Cα for
    glycine) < 8 Å, 0 where both are aligned and farther, NaN where either is not aligned."""
    coords = template.structure.coords
    points = np.where(np.isfinite(coords[:, CB]).all(axis=1)[:, None], coords[:, CB], coords[:, CA])
    aligned = np.full((length, 3), np.nan)
    columns, residues = template.pairs[:, 0], template.pairs[:, 1]
    inside = columns < length
    aligned[columns[inside]] = points[residues[inside]]
    with np.errstate(invalid="ignore"):
        distance = np.sqrt(((aligned[:, None] - aligned[None, :]) ** 2).sum(-1))
    contacts = (distance < CONTACT_CUTOFF).astype(np.float64)
    contacts[~np.isfinite(distance)] = np.nan
    return contacts


def predicted_contacts(prediction: dict[str, np.ndarray]) -> tuple[np.ndarray, str]:
    """``([L, L] values in 0..1, label)``: ``P(d_Cβ < 8 Å)`` from the distogram when the prediction kept it,
    else the model's own Cβ contacts (1/0)."""
    if "dist" in prediction and prediction["dist"].size:
        probability = np.asarray(prediction["dist"], dtype=np.float64)[..., :CONTACT_BINS].sum(axis=-1)
        return probability, "predicted contact probability (distogram)"
    backbone = np.asarray(prediction["backbone"], dtype=np.float64)
    points = np.where(np.isfinite(backbone[:, CB]).all(axis=1)[:, None], backbone[:, CB], backbone[:, CA])
    distance = np.sqrt(((points[:, None] - points[None, :]) ** 2).sum(-1))
    return (distance < CONTACT_CUTOFF).astype(np.float64), "contacts of the model (no distogram kept)"


def superposed_template_pdb(template: TopTemplate, model_ca: np.ndarray) -> str | None:
    """PDB text (chain T) of the template's observed residues superposed on the model by its aligned Cα; None
    when fewer than 3 aligned pairs have coordinates."""
    columns, residues = template.pairs[:, 0], template.pairs[:, 1]
    inside = columns < len(model_ca)
    mobile = template.structure.coords[residues[inside], CA].astype(np.float64)
    target = np.asarray(model_ca, dtype=np.float64)[columns[inside]]
    usable = np.isfinite(mobile).all(axis=1) & np.isfinite(target).all(axis=1)
    if usable.sum() < 3:
        return None
    rotation, translation = kabsch(mobile, target)
    coords = template.structure.coords.astype(np.float64)
    moved = coords @ rotation.T + translation
    sequence = "".join(letter if letter in RESIDUE_NAMES else "X" for letter in template.observed_sequence)
    numbers = template.residue_numbers if len(template.residue_numbers) == len(sequence) else None
    return format_pdb(sequence, moved, chain_id="T", residue_numbers=numbers, title=f"TEMPLATE {template.name}")


def viewer_html(model_pdb: str, template_pdb: str | None, template_name: str | None, assets: str) -> str:
    """The 3D view block of a protein page: the model as a cartoon coloured by pLDDT bands (B-factors), the
    superposed template as a grey Cα trace that a checkbox shows; 3Dmol.js and the page script from
    ``assets`` (a relative URL), the coordinates inline so that the page opens from disk."""
    toggle = ""
    if template_pdb is not None:
        toggle = (f"<label><input type=\"checkbox\" id=\"show-template\"> superpose the top template "
                  f"<code>{html.escape(str(template_name))}</code> (grey Cα trace)</label>")
    model_json = json.dumps(model_pdb).replace("</", "<\\/")
    template_json = json.dumps(template_pdb).replace("</", "<\\/")
    return (f"<div class=\"viewer-box\"><div id=\"viewer\" class=\"viewer\" data-status=\"loading\">"
            f"<noscript>The 3D view needs JavaScript.</noscript></div>"
            f"<div class=\"viewer-controls\">{toggle} <button type=\"button\" id=\"reset-view\">reset view"
            f"</button></div></div>\n"
            f"<script>window.TRACKFOLD_MODEL = {model_json}; window.TRACKFOLD_TEMPLATE = {template_json};</script>\n"
            f"<script src=\"{assets}/3Dmol-min.js\"></script>\n<script src=\"{assets}/protein.js\"></script>")


def read_prediction(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a ``.pred.npz`` that the page needs (``backbone``, ``plddt``, and ``dist`` if kept)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in ("backbone", "plddt", "dist") if key in data.files}
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read the prediction arrays: {error}", path=path) from error
