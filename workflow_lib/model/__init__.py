"""trackfold's RoseTTAFold-style three-track network.

Modules mirror the paper's diagram: ``embeddings`` (MSA and pair embeddings), ``msa`` (MSA2MSA), ``pair``
(MSA2Pair, Pair2Pair, Pair2MSA), ``performer`` (FAVOR+), ``structure`` (frames, InitialStructure, Str2Str,
Str2MSA), ``heads``, ``network`` (ThreeTrackNetwork), ``config`` (ModelConfig and presets) and
``checkpoint`` (weights files). Training (losses included) is :mod:`workflow_lib.training`, inference
:mod:`workflow_lib.inference`.
"""

from workflow_lib.model.config import PRESETS, ModelConfig, preset
from workflow_lib.model.network import ThreeTrackNetwork, count_parameters

__all__ = ["PRESETS", "ModelConfig", "ThreeTrackNetwork", "count_parameters", "preset"]
