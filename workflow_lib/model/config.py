"""Configuration of the three-track network: one frozen dataclass, named presets, strict parsing.

Every module constructor takes keyword arguments whose names are these keys (``c_m``, ``no_heads_msa``...),
so a key means the same thing everywhere. Channel widths are declared once here and never re-derived.

Presets (parameter counts are those of :class:`~workflow_lib.model.network.ThreeTrackNetwork`, see
``tests/test_model_network.py::test_preset_parameter_counts``):

* ``tiny``  -- unit tests only: 40,406 parameters.
* ``small`` -- trainable on a CPU: 1,559,534 parameters.
* ``base``  -- a GPU model (8 two-track + 4 three-track blocks, activation checkpointing on): 38,427,890.

(Counts without template or co-evolution inputs, whose widths default to 0 = not accepted; set
``c_template_pair``, ``c_template_1d`` and ``c_coevolution`` to the feature builder's channel counts.)
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from workflow_lib.errors import InputError

ROW_ATTENTION_MODES = ("plain", "tied", "soft_tied")
COLUMN_ATTENTION_MODES = ("plain", "performer")
TEMPLATE_MODES = ("attention", "mean")
STR_ATTENTION_MODES = ("ipa", "geometric")
OUTER_PRODUCT_WEIGHTINGS = ("mean", "learned")

N_TOKENS = 22
"""trackfold's residue alphabet: 20 amino acids (ACDEFGHIKLMNPQRSTVWY), X = 20, gap = 21."""


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of :class:`~workflow_lib.model.network.ThreeTrackNetwork` (see module docstring)."""

    # widths: MSA (c_m), pair (c_z), 3D-track node state (c_s)
    c_m: int = 64
    c_z: int = 64
    c_s: int = 64
    # heads per track
    no_heads_msa: int = 4
    no_heads_pair: int = 4
    no_heads_str: int = 4
    # depth: two-track blocks, graph-transformer layers of the initial structure, three-track blocks
    n_blocks_2track: int = 4
    n_graph_layers: int = 2
    n_blocks_3track: int = 2
    # MSA2MSA
    row_attention: str = "soft_tied"
    column_attention: str = "performer"
    performer_features: int | None = None  # None: ceil(d_h * ln d_h) random features per head
    row_pair_bias: bool = True
    gating: bool = True
    transition_factor: int = 2
    # MSA2Pair / Pair2Pair
    c_hidden_opm: int = 16
    outer_product_weighting: str = "learned"
    row_attention_to_pair: bool = False  # MSA2Pair also reads the tied/soft-tied row-attention maps
    triangle_updates: bool = True
    c_hidden_tri_mul: int = 32
    # embeddings
    relpos_max: int = 32
    c_template_pair: int = 0   # 0: no template pair features accepted
    c_template_1d: int = 0     # 0: no template 1D features accepted
    template_mode: str = "attention"
    c_coevolution: int = 0     # 0: no co-evolution pair feature accepted
    msa_statistics: bool = False  # deletions per MSA cell, profile and deletion mean per residue as inputs
    # 3D track (Str2Str attention: IPA or ESM3's geometric attention; Str2MSA)
    str_attention: str = "ipa"
    no_qk_points: int = 4
    no_v_points: int = 4
    no_heads_geometric: int = 16
    position_scale: float = 10.0
    str2msa_min_cutoff: float = 8.0
    str2msa_max_cutoff: float = 20.0
    # heads
    dist_bins: int = 37
    omega_bins: int = 37
    theta_bins: int = 37
    phi_bins: int = 19
    plddt_bins: int = 50
    # regularisation and memory
    dropout: float = 0.1
    activation_checkpointing: bool = False
    chunk_size: int | None = None

    def __post_init__(self) -> None:
        def need(ok: bool, problem: str) -> None:
            if not ok:
                raise InputError(f"model config: {problem}")

        for name in ("c_m", "c_z", "c_s", "no_heads_msa", "no_heads_pair", "no_heads_str", "n_graph_layers",
                     "transition_factor", "c_hidden_opm", "c_hidden_tri_mul", "relpos_max", "no_qk_points",
                     "no_v_points", "no_heads_geometric", "dist_bins", "omega_bins", "theta_bins", "phi_bins",
                     "plddt_bins"):
            value = getattr(self, name)
            need(isinstance(value, int) and not isinstance(value, bool) and value > 0,
                 f"{name} must be a positive integer, got {value!r}")
        for name in ("n_blocks_2track", "n_blocks_3track", "c_template_pair", "c_template_1d", "c_coevolution"):
            value = getattr(self, name)
            need(isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                 f"{name} must be a non-negative integer, got {value!r}")
        need(self.c_m % 2 == 0, f"c_m must be even for the sinusoidal positional encoding, got {self.c_m}")
        for width, heads in (("c_m", "no_heads_msa"), ("c_z", "no_heads_pair"), ("c_s", "no_heads_str")):
            need(getattr(self, width) % getattr(self, heads) == 0,
                 f"{width}={getattr(self, width)} must be divisible by {heads}={getattr(self, heads)}")
        need(self.row_attention in ROW_ATTENTION_MODES,
             f"row_attention must be one of {ROW_ATTENTION_MODES}, got {self.row_attention!r}")
        need(self.column_attention in COLUMN_ATTENTION_MODES,
             f"column_attention must be one of {COLUMN_ATTENTION_MODES}, got {self.column_attention!r}")
        need(isinstance(self.msa_statistics, bool), f"msa_statistics must be true or false, got {self.msa_statistics!r}")
        need(isinstance(self.row_attention_to_pair, bool),
             f"row_attention_to_pair must be true or false, got {self.row_attention_to_pair!r}")
        need(not self.row_attention_to_pair or self.row_attention != "plain",
             "row_attention_to_pair needs tied or soft_tied row attention (plain attention has a map per row)")
        need(self.str_attention in STR_ATTENTION_MODES,
             f"str_attention must be one of {STR_ATTENTION_MODES}, got {self.str_attention!r}")
        need(self.template_mode in TEMPLATE_MODES,
             f"template_mode must be one of {TEMPLATE_MODES}, got {self.template_mode!r}")
        need(self.outer_product_weighting in OUTER_PRODUCT_WEIGHTINGS,
             f"outer_product_weighting must be one of {OUTER_PRODUCT_WEIGHTINGS}, "
             f"got {self.outer_product_weighting!r}")
        need(self.performer_features is None or (isinstance(self.performer_features, int)
                                                  and self.performer_features > 0),
             f"performer_features must be None or a positive integer, got {self.performer_features!r}")
        need(self.chunk_size is None or (isinstance(self.chunk_size, int) and self.chunk_size > 0),
             f"chunk_size must be None or a positive integer, got {self.chunk_size!r}")
        need(0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), got {self.dropout}")
        need(self.position_scale > 0, f"position_scale must be positive, got {self.position_scale}")
        need(0 < self.str2msa_min_cutoff <= self.str2msa_max_cutoff,
             f"need 0 < str2msa_min_cutoff <= str2msa_max_cutoff, got "
             f"{self.str2msa_min_cutoff}, {self.str2msa_max_cutoff}")

    # --- derived sizes (never stored) -------------------------------------------------------------------
    @property
    def c_hidden_msa(self) -> int:
        """Per-head width of MSA attention."""
        return self.c_m // self.no_heads_msa

    @property
    def c_hidden_pair(self) -> int:
        """Per-head width of pair attention."""
        return self.c_z // self.no_heads_pair

    @property
    def c_hidden_str(self) -> int:
        """Per-head width of 3D-track attention."""
        return self.c_s // self.no_heads_str

    @property
    def n_performer_features(self) -> int:
        """Random features per head: ``performer_features`` or ``ceil(d_h ln d_h)`` (Choromanski et al. 2021)."""
        if self.performer_features is not None:
            return self.performer_features
        return default_nb_features(self.c_hidden_msa)

    # --- (de)serialisation --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build a config; unknown keys are an :class:`InputError` naming them."""
        if not isinstance(data, dict):
            raise InputError(f"model config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"model config: unknown key(s) {unknown}; known keys are {sorted(known)}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"model config is not valid JSON: {err}") from err
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some keys changed (validated like :meth:`from_dict`)."""
        return ModelConfig.from_dict({**self.to_dict(), **changes})


def default_nb_features(d: int) -> int:
    """``ceil(d ln d)`` random features for head width ``d`` (at least ``d``)."""
    return max(d, math.ceil(d * math.log(d))) if d > 1 else 1


PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(c_m=16, c_z=16, c_s=16, no_heads_msa=2, no_heads_pair=2, no_heads_str=2,
                 n_blocks_2track=1, n_graph_layers=1, n_blocks_3track=1, c_hidden_opm=4, c_hidden_tri_mul=8,
                 relpos_max=8, no_qk_points=2, no_v_points=2, transition_factor=2, dropout=0.0),
    "small": dict(c_m=64, c_z=64, c_s=64, no_heads_msa=4, no_heads_pair=4, no_heads_str=4,
                  n_blocks_2track=4, n_graph_layers=2, n_blocks_3track=2, c_hidden_opm=16, c_hidden_tri_mul=32,
                  relpos_max=32, no_qk_points=4, no_v_points=4, transition_factor=2, dropout=0.1),
    "base": dict(c_m=256, c_z=128, c_s=128, no_heads_msa=8, no_heads_pair=4, no_heads_str=8,
                 n_blocks_2track=8, n_graph_layers=4, n_blocks_3track=4, c_hidden_opm=32, c_hidden_tri_mul=128,
                 relpos_max=32, no_qk_points=4, no_v_points=8, transition_factor=4, dropout=0.15,
                 activation_checkpointing=True),
}


def preset(name: str, **overrides: Any) -> ModelConfig:
    """The named preset (``tiny``, ``small``, ``base``) with optional overrides."""
    if name not in PRESETS:
        raise InputError(f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}")
    return ModelConfig.from_dict({**PRESETS[name], **overrides})
