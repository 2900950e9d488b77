"""Protein structures: reading PDB/mmCIF, virtual Cβ, PDB writing, 6D pair geometry, DSSP, lDDT and RMSD.

The foundation of the template/feature stage and of the model's structure targets (trRosetta's 6D geometry, Yang et al.
2020, PNAS 117:1496; DSSP states for HHsearch's secondary structure score, Söding 2005, Bioinformatics 21:951).

- :mod:`.parse` — :func:`read_structure` / :func:`read_chain` → frozen :class:`Chain` (N, CA, C, O ``[L, 4, 3]``,
  Cβ, mask, author numbering, chain breaks, B-factors); first model, highest-occupancy altlocs, modified amino
  acids mapped to their parent.
- :mod:`.cbeta` — :func:`virtual_cb` (trRosetta constants), :func:`ideal_oxygen`.
- :mod:`.pdb_writer` — :func:`write_pdb` (atomic; pLDDT in the B-factor column; read by Biopython, TM-align,
  mkdssp).
- :mod:`.geometry` — :func:`dihedral`, :func:`planar_angle`, :func:`pair_geometry` (d, ω, θ, φ) and
  :func:`bin_pair_geometry` (37/37/37/19 classes, no-contact last).
- :mod:`.dssp` — :func:`run_dssp`, :func:`secondary_structure` (8 and 3 states).
- :mod:`.metrics` — :func:`lddt_ca`, :func:`tm_score`, :func:`kabsch`, :func:`kabsch_rmsd`.
"""

from workflow_lib.structure.cbeta import fill_cb, ideal_oxygen, virtual_cb
from workflow_lib.structure.dssp import (
    DSSP_STATES,
    DsspResidue,
    SecondaryStructure,
    mkdssp_version,
    parse_dssp,
    reduce_to_three,
    run_dssp,
    secondary_structure,
)
from workflow_lib.structure.geometry import (
    DIST_BINS,
    NO_CONTACT_DIST,
    NO_CONTACT_OMEGA,
    NO_CONTACT_PHI,
    NO_CONTACT_THETA,
    OMEGA_BINS,
    PHI_BINS,
    THETA_BINS,
    bin_pair_geometry,
    dihedral,
    pair_geometry,
    planar_angle,
)
from workflow_lib.structure.metrics import Lddt, kabsch, kabsch_rmsd, lddt_ca, tm_d0, tm_score
from workflow_lib.structure.parse import BACKBONE_ATOMS, MODIFIED_RESIDUES, Chain, read_chain, read_structure
from workflow_lib.structure.pdb_writer import complete_backbone, format_pdb, write_pdb

__all__ = [
    "BACKBONE_ATOMS", "DIST_BINS", "DSSP_STATES", "MODIFIED_RESIDUES", "NO_CONTACT_DIST", "NO_CONTACT_OMEGA",
    "NO_CONTACT_PHI", "NO_CONTACT_THETA", "OMEGA_BINS", "PHI_BINS", "THETA_BINS",
    "Chain", "DsspResidue", "Lddt", "SecondaryStructure",
    "bin_pair_geometry", "complete_backbone", "dihedral", "fill_cb", "format_pdb", "ideal_oxygen", "kabsch",
    "kabsch_rmsd", "lddt_ca", "mkdssp_version", "pair_geometry", "parse_dssp", "planar_angle", "read_chain",
    "read_structure", "reduce_to_three", "run_dssp", "secondary_structure", "tm_d0", "tm_score", "virtual_cb",
    "write_pdb",
]
