"""Output heads: 6D inter-residue geometry, backbone coordinates and per-residue pLDDT.

The 6D geometry of trRosetta/RoseTTAFold (DESIGN.md, "Features and the model"): Cβ distance ``d`` and dihedral
``omega`` are symmetric in ``(i, j)``, so their logits come from ``z_ij + z_ji``; ``theta`` and ``phi`` are not,
so they read ``z_ij`` directly. Bin counts come from the config (37, 37, 37, 19 by default).
"""

from __future__ import annotations

import torch
from torch import nn

from workflow_lib.model.primitives import LayerNorm, Linear
from workflow_lib.model.structure import Frames, backbone_from_frames, cb_from_backbone


class DistogramHead(nn.Module):
    """``z [*, L, L, C_z]`` -> ``dist``, ``omega`` (symmetric), ``theta``, ``phi`` logits ``[*, L, L, bins]``."""

    def __init__(self, c_z: int, dist_bins: int = 37, omega_bins: int = 37, theta_bins: int = 37,
                 phi_bins: int = 19) -> None:
        super().__init__()
        self.norm = LayerNorm(c_z)
        self.linear_dist = Linear(c_z, dist_bins, init="final")
        self.linear_omega = Linear(c_z, omega_bins, init="final")
        self.linear_theta = Linear(c_z, theta_bins, init="final")
        self.linear_phi = Linear(c_z, phi_bins, init="final")

    def forward(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        z = self.norm(z)
        z_sym = 0.5 * (z + z.transpose(-2, -3))
        return {
            "dist_logits": self.linear_dist(z_sym),
            "omega_logits": self.linear_omega(z_sym),
            "theta_logits": self.linear_theta(z),
            "phi_logits": self.linear_phi(z),
        }


class BackboneHead(nn.Module):
    """Frames ``[*, L]`` from the last Str2Str -> ``coords [*, L, 3 (N, CA, C), 3]`` and ``cb [*, L, 3]``.

    No parameters: an ideal residue is placed in each frame and Cβ follows from trRosetta's constants.
    """

    def forward(self, frames: Frames) -> dict[str, torch.Tensor]:
        coords = backbone_from_frames(frames)
        return {"coords": coords, "cb": cb_from_backbone(coords)}


class PLDDTHead(nn.Module):
    """Per-residue confidence: ``plddt_bins`` bins over [0, 1] -> logits and expected value in [0, 1].

    Input: the 3D-track state ``s [*, L, C_s]`` and the query MSA row ``m0 [*, L, C_m]``.
    """

    def __init__(self, c_s: int, c_m: int, plddt_bins: int = 50) -> None:
        super().__init__()
        self.norm_s = LayerNorm(c_s)
        self.norm_m = LayerNorm(c_m)
        self.linear_1 = Linear(c_s + c_m, c_s, init="relu")
        self.linear_2 = Linear(c_s, plddt_bins, init="final")
        self.register_buffer("bin_centers", (torch.arange(plddt_bins, dtype=torch.float32) + 0.5) / plddt_bins,
                             persistent=False)

    def forward(self, s: torch.Tensor, m0: torch.Tensor) -> dict[str, torch.Tensor]:
        x = torch.cat((self.norm_s(s), self.norm_m(m0)), dim=-1)
        logits = self.linear_2(torch.relu(self.linear_1(x)))
        probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        return {"plddt_logits": logits, "plddt": (probs * self.bin_centers.to(probs.dtype)).sum(dim=-1)}
