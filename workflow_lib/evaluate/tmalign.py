"""TM-score and RMSD through the TM-align program (Zhang & Skolnick 2005, *Nucleic Acids Res.* 33:2302).

Only the matched residues (:mod:`workflow_lib.evaluate.align`) are written, Cα-only, to two temporary PDB
files numbered 1..K in the same order, so both files hold exactly the residues being compared. TM-align is run
twice with ``-L N`` where N is the number of observed native residues, i.e. the TM-score is normalised by the
native length (unmatched native residues count as missed):

- ``tm_score``: TM-align's default, sequence-independent structural alignment (the score TM-align is known for);
  ``rmsd`` and ``tm_aligned`` are that alignment's "RMSD=" and "Aligned length=" (TM-align's RMSD is over its
  own aligned pairs, not over all matched residues);
- ``tm_score_fixed``: the residue correspondence fixed to the matching (``-I`` with a gapless alignment), as
  the TM-score program scores a model against its native (``trackfold evaluate`` reports its own
  :func:`~workflow_lib.structure.metrics.tm_score` under this name, which needs no program).

Without a ``TMalign`` executable on ``PATH`` every value is NaN and ``status`` says so; a failed run gives NaN
and the first line of its error output.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workflow_lib.structure.pdb_writer import write_pdb

_USER_TM = re.compile(r"TM-score=\s*([0-9.]+)\s*\(if scaled by user-specified L")
_CHAIN2_TM = re.compile(r"TM-score=\s*([0-9.]+)\s*\(if normalized by length of Chain_2")
_ALIGNED = re.compile(r"Aligned length=\s*(\d+),\s*RMSD=\s*([0-9.]+)")
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class TmResult:
    """TM-align numbers of one model (module docstring); NaN when not computed."""

    tm_score: float
    rmsd: float
    aligned: float
    tm_score_fixed: float
    status: str


def parse_tmalign(text: str) -> tuple[float, float, int]:
    """(TM-score normalised by the ``-L`` length, or else by Chain_2; RMSD; aligned length) from TM-align's output.

    Raises ``ValueError`` when the output has no TM-score.
    """
    score = _USER_TM.search(text) or _CHAIN2_TM.search(text)
    aligned = _ALIGNED.search(text)
    if score is None or aligned is None:
        raise ValueError("TM-align output has no TM-score / Aligned length line")
    return float(score.group(1)), float(aligned.group(2)), int(aligned.group(1))


def tmalign_executable() -> str | None:
    return shutil.which("TMalign")


def run_tmalign(pred_ca: np.ndarray, native_ca: np.ndarray, sequence_pred: str, sequence_native: str,
                native_length: int, *, executable: str | None = None) -> TmResult:
    """TM-align the matched Cα ``pred_ca`` ``[K, 3]`` onto ``native_ca`` ``[K, 3]`` (row k faces row k)."""
    executable = executable or tmalign_executable()
    if executable is None:
        return TmResult(np.nan, np.nan, np.nan, np.nan, "TMalign not found on PATH")
    count = len(pred_ca)
    if count < 5:
        return TmResult(np.nan, np.nan, np.nan, np.nan, f"only {count} matched residues")
    with tempfile.TemporaryDirectory(prefix="trackfold_tmalign_") as tmp:
        folder = Path(tmp)
        paths = {}
        for key, ca, sequence in (("model", pred_ca, sequence_pred), ("native", native_ca, sequence_native)):
            coords = np.full((count, 3, 3), np.nan)
            coords[:, 1] = ca
            paths[key] = folder / f"{key}.pdb"
            write_pdb(paths[key], sequence, coords, title=f"trackfold evaluate {key}")
        fasta = folder / "fixed.fasta"
        fasta.write_text(f">model\n{sequence_pred}\n>native\n{sequence_native}\n")
        length = ["-L", str(max(native_length, count))]
        base = [executable, str(paths["model"]), str(paths["native"]), *length]
        try:
            free = _run(base)
            fixed = _run([*base, "-I", str(fasta)])
        except (RuntimeError, ValueError) as error:
            return TmResult(np.nan, np.nan, np.nan, np.nan, f"TMalign failed: {error}")
    return TmResult(free[0], free[1], float(free[2]), fixed[0], "ok")


def _run(command: list[str]) -> tuple[float, float, int]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RuntimeError(str(error)) from None
    if done.returncode != 0:
        first = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()[0]
        raise RuntimeError(first)
    return parse_tmalign(done.stdout)
