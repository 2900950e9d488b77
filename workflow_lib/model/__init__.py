"""trackfold's RoseTTAFold-style three-track network (issue 6).

Modules mirror the paper's diagram: ``embeddings`` (MSA and pair embeddings), ``msa`` (MSA2MSA), ``pair``
(MSA2Pair, Pair2Pair, Pair2MSA), ``performer`` (FAVOR+), ``structure`` (frames, InitialStructure, Str2Str,
Str2MSA), ``heads``, ``network`` (ThreeTrackNetwork), ``config`` (ModelConfig and presets) and
``checkpoint`` (weights files). Losses, training and inference entry points live elsewhere.

Inference: ``predict`` (feature dict -> network inputs, crop-and-stitch for long proteins, backbone, pLDDT,
6D probabilities) and ``predict_cli`` (``trackfold predict``; output files and their schemas).
"""

from workflow_lib.model.config import PRESETS, ModelConfig, preset
from workflow_lib.model.network import ThreeTrackNetwork, count_parameters

__all__ = ["PRESETS", "ModelConfig", "ThreeTrackNetwork", "count_parameters", "preset"]
