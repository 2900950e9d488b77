"""Build, write and read the per-protein feature file (:data:`~workflow_lib.schemas.features.FEATURES`).

``build_features(a3m)`` = :func:`~workflow_lib.seqio.msa.read_a3m` (bad input is an
:class:`~workflow_lib.errors.InputError` naming the file and record) → :func:`msa_features` → template
features (:func:`workflow_lib.features.templates.template_features` of the best ``max_templates`` hits in
``template_hits`` against the database ``templates``; T = 0 without them) → validation against the schema.
Deterministic: the same inputs and options give byte-identical arrays (the npz container itself carries zip
timestamps).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.features.msa_features import (
    DEFAULT_MAX_SEQS,
    DEFAULT_MAX_STATS_SEQS,
    PROFILE_PSEUDOCOUNT,
    WEIGHT_IDENTITY,
    msa_features,
)
from workflow_lib.features.states import DEFAULT_BLOCK_BYTES
from workflow_lib.features.templates import DEFAULT_MAX_TEMPLATES, read_hits, template_features
from workflow_lib.schemas.features import FEATURES, FEATURES_V5, empty_templates
from workflow_lib.schemas.io import read_npz, write_npz
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.templates.database import TemplateDatabase, load_template_db


def build_features(a3m_path: str | Path, *, max_seqs: int = DEFAULT_MAX_SEQS,
                   max_stats_seqs: int = DEFAULT_MAX_STATS_SEQS, seed: int = 0,
                   identity: float = WEIGHT_IDENTITY, profile_pseudocount: float = PROFILE_PSEUDOCOUNT,
                   pair_pseudocount: float = 0.0, block_bytes: int = DEFAULT_BLOCK_BYTES,
                   templates: str | Path | TemplateDatabase | None = None, template_hits: str | Path | None = None,
                   max_templates: int = DEFAULT_MAX_TEMPLATES) -> dict[str, np.ndarray]:
    """Features of one A3M (query first), validated against :data:`FEATURES`; options as :func:`msa_features`.

    ``templates`` (a template database directory or a loaded one) and ``template_hits`` (that query's
    ``.hits.parquet``) go together; without them the template keys are empty (T = 0).
    """
    if (templates is None) != (template_hits is None):
        raise InputError("template features need both a template database and a template-hits table",
                         path=a3m_path)
    alignment = read_a3m(a3m_path)
    features = msa_features(alignment, max_seqs=max_seqs, max_stats_seqs=max_stats_seqs, seed=seed,
                            identity=identity, profile_pseudocount=profile_pseudocount,
                            pair_pseudocount=pair_pseudocount, block_bytes=block_bytes)
    if templates is None:
        features.update(empty_templates(alignment.length))
    else:
        database = templates if isinstance(templates, TemplateDatabase) else load_template_db(templates)
        features.update(template_features(read_hits(template_hits), database, features["msa"][0],
                                          max_templates=max_templates, where=template_hits))
    return FEATURES.validate(features, str(a3m_path))


FEATURE_COMPRESSLEVEL = 3
"""zlib level of feature files: level 3 wrote them about 3x faster than the default level 6 for about 7% more bytes
when they held the float16 template maps (benchmarks/RESULTS.md, "Features: CPU per protein")."""


def write_features(path: str | Path, features: dict[str, np.ndarray]) -> None:
    """Validate ``features`` against :data:`FEATURES` and write them as compressed npz (zlib level
    :data:`FEATURE_COMPRESSLEVEL`), atomically."""
    write_npz(path, features, FEATURES, compresslevel=FEATURE_COMPRESSLEVEL)


def read_features(path: str | Path) -> dict[str, np.ndarray]:
    """Load a feature file and validate it (:class:`~workflow_lib.errors.SchemaError` naming the file); files of
    layout 5 (:data:`~workflow_lib.schemas.features.FEATURES_V5`, the template maps stored whole) are read as
    they are, and the template readers of :mod:`workflow_lib.features.templates` take either form."""
    return read_npz(path, FEATURES, older=(FEATURES_V5,))
