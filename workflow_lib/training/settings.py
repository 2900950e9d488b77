"""Training settings shared (names and defaults) by :class:`workflow_lib.training.config.TrainConfig`
(``trackfold train``) and :class:`workflow_lib.workflow.config.TrainWorkflowConfig` (config section ``train``),
which both inherit :class:`TrainSettings`.

Torch-free, like the package's ``__init__``: the workflow's config (read by every ``snakemake`` invocation,
``-n`` included) imports it without importing torch; ``tests/test_train_workflow.py`` also checks these, and the
constants of ``trackfold train-data`` and ``train-pack``, against ``config/schema.yaml`` and the command line.
"""

from __future__ import annotations

from dataclasses import dataclass

CHAIN_MIN_LENGTH = 40
"""Shortest chain kept for training, in residues (``trackfold train-data --min-length``, ``train.min_length``)."""
CHAIN_MAX_LENGTH = 400
"""Longest chain kept for training, in residues (``trackfold train-data --max-length``, ``train.max_length``)."""
SPLIT_IDENTITY = 0.3
"""No validation chain is more identical than this to a training chain (``trackfold train-data --identity``,
``train.identity``)."""
VAL_FRACTION = 0.1
"""Fraction of the chains, whole identity clusters, held out for validation (``trackfold train-data
--val-fraction``, ``train.val_fraction``)."""
PACK_MAX_ROWS = 256
"""MSA rows per chain in a training pack, the query included (``trackfold train-pack --max-rows``,
``train.pack_max_rows``): a training crop samples its ``max_msa_rows`` from them."""


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation and schedule settings of one training run."""

    steps: int = 1000
    crop_size: int = 96
    batch_size: int = 1
    """Crops per optimizer step (padded to the longest; :func:`~workflow_lib.training.examples.collate`)."""
    max_msa_rows: int = 64
    max_templates: int = 0
    """Templates per crop, from a training pack's template hits (0: train without templates)."""
    template_dropout: float = 0.25
    """Probability that each of a training crop's templates is left out (validation crops keep them all)."""
    self_template_rate: float = 0.0
    """Probability that a training crop gets its own structure, coordinates perturbed by
    :data:`~workflow_lib.training.examples.SELF_TEMPLATE_NOISE` Å, as its first template (needs
    ``max_templates`` ≥ 1): a pack's hits never include the chain itself or anything above its identity limit, so
    without it the network never learns to copy a template of the same protein (validation crops never get one)."""
    neff_sampling: float = 0.0
    """Exponent α of depth-weighted sampling: a training chain is drawn with probability ∝ Neff^α / (its
    identity cluster's size), so alignments that carry co-evolution are seen more often (α = 0.5: a chain of Neff
    100 ten times as often as one of Neff 1). 0: a cluster uniformly, then a member uniformly."""
    lr: float = 1e-3
    warmup_steps: int = 50
    min_lr_fraction: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    checkpoint_every: int = 50
    val_every: int = 200
    val_max_chains: int = 24
    val_crop: int = 192
    redraw_every: int = 100
    seed: int = 0
    precision: str = "float32"
    """``bfloat16``: the forward pass under autocast (parameters, optimizer state and losses stay float32): less
    CPU per step on a CPU with AVX512-BF16, and tensor cores on a GPU (what autocast saves on the network's
    forward pass: benchmarks/RESULTS.md, "Three-track inference on real proteins (CPU)"). Validation passes run
    in float32."""
    init_model: str = ""
    """Warm start: a checkpoint (``model.pt``) whose weights initialise a new run (keys and shapes must match,
    except a co-evolution input trained on fewer channels, widened with zeros for the channels appended since);
    empty = random initialisation. Ignored when resuming (the state holds the weights)."""
    init_blocks: str = ""
    """With ``init_model``: which of its blocks start a shallower network, ``TWO_TRACK+THREE_TRACK`` block
    indices in order (``"0,2+1"``: its two-track blocks 0 and 2 and its three-track block 1 become the new
    network's two-track blocks 0, 1 and three-track block 0; the embeddings and heads are kept whole); the
    model's ``n_blocks_2track`` and ``n_blocks_3track`` must match the counts. Empty = every block."""
