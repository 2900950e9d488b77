"""The three-track network (RoseTTAFold, Baek et al. 2021, Science 373:871; DESIGN.md, "Features and the model").

    embeddings -> n_blocks_2track x [MSA2MSA, MSA2Pair, Pair2Pair, Pair2MSA]
               -> InitialStructure (graph transformer)
               -> n_blocks_3track x [MSA2MSA, MSA2Pair, Pair2Pair, Pair2MSA, Str2Str, Str2MSA]
               -> heads (6D distogram, backbone coordinates + Cβ, pLDDT)

Data and model meet only at the feature dict (see :meth:`ThreeTrackNetwork.forward`).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from workflow_lib.errors import InputError
from workflow_lib.model.config import N_TOKENS, ModelConfig
from workflow_lib.model.embeddings import MSAEmbedding, PairEmbedding
from workflow_lib.model.heads import BackboneHead, DistogramHead, PLDDTHead
from workflow_lib.model.msa import MSA2MSA
from workflow_lib.model.pair import MSA2Pair, Pair2MSA, Pair2Pair, pair_mask_from
from workflow_lib.model.performer import FastAttention
from workflow_lib.model.structure import Frames, InitialStructure, Str2MSA, Str2Str
from workflow_lib.schemas.features import PROFILE_STATES


def build(cls: type[nn.Module], config: ModelConfig, **extra: Any) -> nn.Module:
    """Instantiate ``cls`` with every constructor argument whose name is a config key (plus ``extra``)."""
    params = inspect.signature(cls.__init__).parameters
    kwargs = {name: getattr(config, name) for name in params if name != "self" and hasattr(config, name)}
    kwargs.update(extra)
    return cls(**kwargs)


class TwoTrackBlock(nn.Module):
    """MSA2MSA -> MSA2Pair -> Pair2Pair -> Pair2MSA on ``m [*, N_seq, L, C_m]`` and ``z [*, L, L, C_z]``
    (with ``row_attention_to_pair`` MSA2Pair also reads MSA2MSA's row-attention maps)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.msa2msa = build(MSA2MSA, config)
        self.msa2pair = build(MSA2Pair, config)
        self.pair2pair = build(Pair2Pair, config)
        self.pair2msa = build(Pair2MSA, config)

    def forward(self, m: torch.Tensor, z: torch.Tensor, msa_mask: torch.Tensor, pair_mask: torch.Tensor,
                msa_weights: torch.Tensor | None, chunk_size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        maps = None
        if self.msa2pair.linear_maps is not None:
            m, maps = self.msa2msa(m, z, msa_mask, chunk_size=chunk_size, return_maps=True)
        else:
            m = self.msa2msa(m, z, msa_mask, chunk_size=chunk_size)
        z = self.msa2pair(m, z, msa_mask, msa_weights, chunk_size=chunk_size, maps=maps)
        z = self.pair2pair(z, pair_mask, chunk_size=chunk_size)
        m = self.pair2msa(z, m, msa_mask)
        return m, z


class ThreeTrackBlock(nn.Module):
    """A two-track block followed by Str2Str (IPA frame update) and Str2MSA (distance-masked attention)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.two_track = TwoTrackBlock(config)
        self.str2str = build(Str2Str, config)
        self.str2msa = build(Str2MSA, config)

    def forward(self, m: torch.Tensor, z: torch.Tensor, s: torch.Tensor, rot: torch.Tensor, trans: torch.Tensor,
                msa_mask: torch.Tensor, pair_mask: torch.Tensor, seq_mask: torch.Tensor,
                msa_weights: torch.Tensor | None, chunk_size: int | None) -> tuple[torch.Tensor, ...]:
        m, z = self.two_track(m, z, msa_mask, pair_mask, msa_weights, chunk_size)
        s, frames = self.str2str(m[..., 0, :, :], z, s, Frames(rot, trans), seq_mask)
        m = self.str2msa(m, s, frames, seq_mask)
        return m, z, s, frames.rot, frames.trans


class ThreeTrackNetwork(nn.Module):
    """RoseTTAFold-style three-track network built from a :class:`ModelConfig`.

    ``forward(batch)`` takes a dict of tensors (``B`` proteins, ``N`` MSA rows, ``L`` residues, ``T`` templates):

    ==================  ====================  ==================================================
    key                 shape / dtype         meaning
    ==================  ====================  ==================================================
    msa                 [B, N, L] int         residue codes 0..21 (row 0 is the query)
    residue_index       [B, L] int            residue numbering (gaps allowed)
    seq_mask            [B, L] (optional)     1 = real residue, 0 = padding
    msa_mask            [B, N, L] (optional)  1 = real row/residue (default: seq_mask on all rows)
    msa_weights         [B, N] (optional)     row weights for the outer product (weighting 'mean')
    templates_pair      [B, T, L, L, C_t]     template pair features (needs c_template_pair)
    templates_1d        [B, T, L, C]          template 1D features (needs c_template_1d)
    template_mask       [B, T] (optional)     1 = real template
    coevolution         [B, L, L, C_c]        co-evolution pair feature (needs c_coevolution)
    deletion_matrix     [B, N, L]             insertion counts before each column (needs msa_statistics)
    profile             [B, L, 21]            weighted aa + gap frequencies (needs msa_statistics)
    deletion_mean       [B, L]                mean insertion count per column (needs msa_statistics)
    ==================  ====================  ==================================================

    Output dict: ``dist_logits``/``omega_logits``/``theta_logits`` ``[B, L, L, 37]``, ``phi_logits``
    ``[B, L, L, 19]``, ``coords [B, L, 3, 3]`` (N, CA, C), ``cb [B, L, 3]``, ``plddt [B, L]`` in [0, 1],
    ``plddt_logits [B, L, 50]``, ``single [B, L, C_m]`` (query MSA row), ``pair [B, L, L, C_z]``,
    ``state [B, L, C_s]``, ``frames_rot [B, L, 3, 3]``, ``frames_trans [B, L, 3]``, and the frames after the
    initial structure and after each three-track block, ``trajectory_rot [K, B, L, 3, 3]`` and
    ``trajectory_trans [K, B, L, 3]`` (``K = n_blocks_3track + 1``; the last are the final frames).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.msa_embedding = MSAEmbedding(config.c_m, msa_statistics=config.msa_statistics)
        self.pair_embedding = build(PairEmbedding, config)
        self.two_track_blocks = nn.ModuleList(TwoTrackBlock(config) for _ in range(config.n_blocks_2track))
        self.initial_structure = build(InitialStructure, config)
        self.three_track_blocks = nn.ModuleList(ThreeTrackBlock(config) for _ in range(config.n_blocks_3track))
        self.distogram_head = build(DistogramHead, config)
        self.backbone_head = BackboneHead()
        self.plddt_head = build(PLDDTHead, config)

    # ------------------------------------------------------------------------------------------------------
    def redraw_performer_features(self, generator: torch.Generator | None = None) -> int:
        """Re-sample every FAVOR+ projection; returns how many were redrawn."""
        kernels = [mod for mod in self.modules() if isinstance(mod, FastAttention)]
        for kernel in kernels:
            kernel.redraw_features(generator)
        return len(kernels)

    def _checked_inputs(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
        cfg = self.config
        for key in ("msa", "residue_index"):
            if key not in batch:
                raise InputError(f"model input: missing required key {key!r}")
        msa = batch["msa"]
        if msa.dim() != 3 or msa.dtype.is_floating_point:
            raise InputError(f"model input: msa must be an integer tensor [B, N, L], got {tuple(msa.shape)} "
                             f"{msa.dtype}")
        b, _, n_res = msa.shape
        if msa.numel() and (int(msa.min()) < 0 or int(msa.max()) >= N_TOKENS):
            raise InputError(f"model input: msa codes must be in [0, {N_TOKENS}), got "
                             f"[{int(msa.min())}, {int(msa.max())}]")
        expected = {"residue_index": (b, n_res), "seq_mask": (b, n_res), "msa_mask": tuple(msa.shape),
                    "msa_weights": tuple(msa.shape[:2])}
        for key, shape in expected.items():
            if key in batch and batch[key] is not None and tuple(batch[key].shape) != shape:
                raise InputError(f"model input: {key} must have shape {shape}, got {tuple(batch[key].shape)}")
        width_keys = {"templates_pair": "c_template_pair", "templates_1d": "c_template_1d",
                      "coevolution": "c_coevolution"}
        for key, width_key in width_keys.items():
            if batch.get(key) is None:
                continue
            width = getattr(cfg, width_key)
            if width == 0:
                raise InputError(f"model input: {key} given but the model config does not accept it "
                                 f"({width_key}=0)")
            if batch[key].shape[-1] != width and not (key == "coevolution" and batch[key].shape[-1] > width):
                raise InputError(f"model input: {key} has {batch[key].shape[-1]} channels, config expects {width}")
        statistics = {"deletion_matrix": tuple(msa.shape), "profile": (b, n_res, PROFILE_STATES),
                      "deletion_mean": (b, n_res)}
        for key, shape in statistics.items():
            given = batch.get(key) is not None
            if given and not cfg.msa_statistics:
                raise InputError(f"model input: {key} given but the model config does not accept MSA statistics "
                                 "(msa_statistics=false)")
            if cfg.msa_statistics and not given:
                raise InputError(f"model input: the model reads MSA statistics (msa_statistics=true): {key} missing")
            if given and tuple(batch[key].shape) != shape:
                raise InputError(f"model input: {key} must have shape {shape}, got {tuple(batch[key].shape)}")
        known = {"msa", "residue_index", "seq_mask", "msa_mask", "msa_weights", "templates_pair", "templates_1d",
                 "template_mask", "coevolution", *statistics}
        unknown = sorted(set(batch) - known)
        if unknown:
            raise InputError(f"model input: unknown key(s) {unknown}")
        checked = {key: batch.get(key) for key in known}
        if checked["coevolution"] is not None:   # the first c_coevolution channels (later ones were appended)
            checked["coevolution"] = checked["coevolution"][..., :cfg.c_coevolution]
        return checked

    def _run(self, block: nn.Module, *args: Any) -> Any:
        if self.config.activation_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(block, *args, use_reentrant=False)
        return block(*args)

    def forward(self, batch: dict[str, torch.Tensor], chunk_size: int | None = None) -> dict[str, torch.Tensor]:
        """Run the network (see class docstring). ``chunk_size`` overrides ``config.chunk_size``."""
        x = self._checked_inputs(batch)
        chunk_size = chunk_size if chunk_size is not None else self.config.chunk_size
        msa = x["msa"].long()
        dtype = self.msa_embedding.token.weight.dtype
        seq_mask = x["seq_mask"]
        seq_mask = torch.ones(msa.shape[0], msa.shape[2], dtype=dtype, device=msa.device) \
            if seq_mask is None else seq_mask.to(dtype)
        msa_mask = seq_mask[:, None, :].expand(msa.shape).to(dtype)
        if x["msa_mask"] is not None:
            msa_mask = msa_mask * x["msa_mask"].to(dtype)
        pair_mask = pair_mask_from(seq_mask)
        msa_weights = x["msa_weights"]

        m = self.msa_embedding(msa, x["residue_index"], x["deletion_matrix"], x["profile"], x["deletion_mean"])
        z = self.pair_embedding(msa[:, 0], x["residue_index"], templates_pair=x["templates_pair"],
                                templates_1d=x["templates_1d"], template_mask=x["template_mask"],
                                coevolution=x["coevolution"], chunk_size=chunk_size)
        for block in self.two_track_blocks:
            m, z = self._run(block, m, z, msa_mask, pair_mask, msa_weights, chunk_size)
        s, frames = self.initial_structure(m[:, 0], z, seq_mask)
        rot, trans = frames
        trajectory = [(rot, trans)]
        for block in self.three_track_blocks:
            m, z, s, rot, trans = self._run(block, m, z, s, rot, trans, msa_mask, pair_mask, seq_mask,
                                            msa_weights, chunk_size)
            trajectory.append((rot, trans))
        frames = Frames(rot, trans)
        out = dict(self.distogram_head(z))
        out.update(self.backbone_head(frames))
        out.update(self.plddt_head(s, m[:, 0]))
        out.update(single=m[:, 0], pair=z, state=s, frames_rot=rot, frames_trans=trans,
                   trajectory_rot=torch.stack([r for r, _ in trajectory]),
                   trajectory_trans=torch.stack([t for _, t in trajectory]))
        return out


def count_parameters(module: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
