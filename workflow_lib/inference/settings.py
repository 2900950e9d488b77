"""Prediction settings shared (names and defaults) by :class:`workflow_lib.inference.predict.PredictOptions`
(the library and ``trackfold predict``) and :class:`workflow_lib.workflow.config.PredictConfig` (config section
``predict``), which both inherit :class:`PredictSettings`: a prediction run by hand with no options is the
prediction the workflow makes.

Torch-free, like the package's ``__init__``: the workflow's config (read by every ``snakemake`` invocation,
``-n`` included) imports it without importing torch; ``tests/test_inference_settings.py`` also checks these
against ``config/schema.yaml`` and the command-line parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL = "models/trackfold_lite_v2.pt"
"""The shipped checkpoint, relative to the repository (the workflow's directory); :func:`default_model_path`
resolves it for a command run from anywhere."""

DEFAULT_WINDOW = 128
"""Residues per network call; longer proteins are cropped and stitched. 128 is the crop length the shipped
checkpoint was trained on; on held-out PDB chains longer than that it folds better than larger windows
(RoseTTAFold's 300) and than one pass over the whole chain, at about the same CPU (benchmarks/RESULTS.md,
"Structure prediction: the crop-and-stitch window (validation chains)")."""

DEFAULT_MAX_MSA = 64
"""MSA rows (query included) given to the network per call: the rows the shipped checkpoint was trained with
(other caps: benchmarks/RESULTS.md, "Structure prediction: MSA rows at inference (validation chains)" and
"Structure prediction: MSA rows at inference (E. coli)"). The co-evolution maps and the profile are computed by
the feature stage from every row, whatever this cap."""

FOLD_MODES = ("network", "distogram")
"""Where the backbone comes from: the structure module's frames (``network``) or restraint minimisation on the
predicted Cβ distogram (``distogram``, :mod:`workflow_lib.inference.fold`)."""

DEFAULT_FOLD = "distogram"
"""The fold that gives the better structures with the shipped checkpoint (benchmarks/RESULTS.md, "Structure
prediction: trained on 4,123 PDB chains, and folding from the distogram"), and the only one whose pLDDT the
checkpoint's calibration maps (:mod:`workflow_lib.inference.confidence`)."""

CROP_PAIRS = ("all", "contacts", "neighbours")
"""Which crops of a protein longer than the window run (:mod:`workflow_lib.inference.stitch`): every pair of
half-window segments (``all``, RoseTTAFold's scheme: about (L / 64)² / 2 network calls); the neighbouring
segments, which chain the backbone, plus the pairs of segments that one of the protein's templates puts in
contact (``contacts``: at least :data:`SEGMENT_CONTACTS` residue pairs with Cβ–Cβ under :data:`TEMPLATE_CONTACT`
Å; the neighbours alone without a template); or the neighbouring segments alone (``neighbours``: about L / 64
calls). Residue pairs no crop holds get no distance restraint in the fold and the no-contact class in the 6D
maps. The default, ``contacts``, keeps the structures of ``all`` where a template exists for less CPU, and costs
a little lDDT-Cα without one (benchmarks/RESULTS.md, "Structure prediction: inference settings, cost against
accuracy (validation chains)")."""

TEMPLATE_CONTACT = 8.0
"""Cβ–Cβ distance (Å) under which a template puts two residues in contact, for ``crop_pairs: contacts``."""

SEGMENT_CONTACTS = 8
"""Residue contacts in a template that make two segments that are not neighbours worth a network call
(``crop_pairs: contacts``)."""

PRECISIONS = ("float32", "bfloat16")
"""Network precision at inference: float32, or bfloat16 autocast (matrix products and attention in bfloat16;
layer norms, softmax statistics and all frame geometry stay float32)."""

HEADS_6D = ("dist", "omega", "theta", "phi")

DEFAULT_TEMPLATE_WEIGHT = 0.9
"""How much of the best template's own Cβ distances the fold's distogram takes where the template is close
(:mod:`workflow_lib.inference.template_restraints`: scaled by the template's identity over the query's length,
nothing under 20%, all of it from 60%); 0 folds from the network's distogram alone. Chosen on validation chains:
+0.03 lDDT-Cα where a template is at least 30% identical, no change below (benchmarks/RESULTS.md, "Structure
prediction: template restraints in the fold (validation chains)")."""


DEFAULT_TEMPLATE_ANCHOR = 3.0
"""Weight of the best template's own Cα–Cα distances in the fold where the template is close (the anchors of
:mod:`workflow_lib.inference.template_restraints`, scaled by the same identity ramp as ``template_weight``);
0 turns them off. Chosen on validation chains (benchmarks/RESULTS.md, "Structure prediction: template anchors in
the fold (validation chains)")."""


@dataclass(frozen=True)
class PredictSettings:
    """What decides a prediction, with the one default each setting has."""

    window: int = DEFAULT_WINDOW
    max_msa: int = DEFAULT_MAX_MSA
    seed: int = 0
    """Seed of the MSA row sample (and of torch): a fixed seed gives identical CPU outputs."""
    batch_size: int = 1
    """At most this many proteins of similar length per forward pass (padding is masked: the outputs differ from
    unbatched ones by float rounding only)."""
    max_tokens: int = 0
    """At most this many padded residues (proteins x longest length) per forward pass; 0: no limit."""
    pair_heads: tuple[str, ...] = HEADS_6D
    """6D probabilities written to ``{protein}.pred.npz``."""
    fold: str = DEFAULT_FOLD
    precision: str = "float32"
    crop_pairs: str = "contacts"
    template_weight: float = DEFAULT_TEMPLATE_WEIGHT
    template_anchor: float = DEFAULT_TEMPLATE_ANCHOR


def default_model_path() -> Path:
    """The shipped checkpoint (:data:`DEFAULT_MODEL`) in the repository this package was installed from, or
    relative to the working directory when the package was installed elsewhere."""
    repository = Path(__file__).resolve().parents[2]
    shipped = repository / DEFAULT_MODEL
    return shipped if shipped.exists() else Path(DEFAULT_MODEL)
