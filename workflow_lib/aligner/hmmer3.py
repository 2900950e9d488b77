"""Read HMMER3 text profiles (``hmmbuild`` output, ``HMMER3/f``) into a :class:`~workflow_lib.aligner.profile.Profile`.

HMMER stores ``-ln p`` (``*`` = p 0) for the match emissions of each node, the insert emissions (dropped:
our insert states emit the background, as in HHsearch, Söding 2005, Bioinformatics 21:951) and the seven transitions
``m->m m->i m->d i->m i->i d->m d->d`` out of each node, in the order of our
:data:`~workflow_lib.aligner.transitions.TRANSITIONS`; the line after ``COMPO`` belongs to node 0 (begin).
HMMER's emissions already include its Dirichlet-mixture priors, so the profile is marked
``has_pseudocounts=True``. The background is our default f(a) (HMMER's own null
model differs slightly).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workflow_lib.aligner.profile import Profile
from workflow_lib.aligner.substitution import DEFAULT_BACKGROUND
from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import AMINO_ACIDS, X_CODE, encode
from workflow_lib.seqio.fasta import open_text


def _probabilities(tokens: list[str]) -> list[float]:
    return [0.0 if token == "*" else float(np.exp(-float(token))) for token in tokens]


def read_hmmer3(path: str | Path) -> Profile:
    """The first model of a HMMER3 text file (plain or .gz). Raises InputError when malformed."""
    path = Path(path)
    with open_text(path) as handle:
        lines = handle.read().splitlines()
    if not lines or not lines[0].startswith("HMMER3"):
        raise InputError("not a HMMER3 text profile", path=path)
    name, neff, consensus = path.stem, 1.0, []
    try:
        start = next(k for k, line in enumerate(lines) if line.startswith("HMM "))
        for line in lines[:start]:
            if line.startswith("NAME"):
                name = line.split()[1]
            elif line.startswith("EFFN"):
                neff = float(line.split()[1])
        if "".join(lines[start].split()[1:21]) != AMINO_ACIDS:
            raise ValueError("not an amino-acid model")
        row = start + 2
        if lines[row].split()[0] == "COMPO":
            row += 1
        transitions = [_probabilities(lines[row + 1].split()[:7])]
        emissions = []
        row += 2
        while row < len(lines) and not lines[row].startswith("//"):
            fields = lines[row].split()
            if int(fields[0]) != len(emissions) + 1:
                raise ValueError(f"bad node line {row + 1}")
            emissions.append(_probabilities(fields[1:21]))
            consensus.append(fields[22] if len(fields) > 22 else "X")
            transitions.append(_probabilities(lines[row + 2].split()[:7]))
            row += 3
        if not emissions:
            raise ValueError("no match states")
    except (StopIteration, IndexError, ValueError) as error:
        raise InputError(f"malformed HMMER3 profile: {error}", path=path) from None
    emission_array = np.asarray(emissions, dtype=np.float64)
    emission_array /= emission_array.sum(axis=1, keepdims=True)
    letters = "".join(c.upper() if c.upper() in AMINO_ACIDS else "X" for c in consensus)
    sequence = encode(letters)
    sequence[sequence > X_CODE] = X_CODE
    length = len(emissions)
    column_neff = np.zeros((length + 1, 3), dtype=np.float32)
    column_neff[:, 0] = neff
    return Profile(name=name, sequence=sequence, emissions=emission_array.astype(np.float32),
                   transitions=np.asarray(transitions, dtype=np.float32), column_neff=column_neff, neff=neff,
                   background=DEFAULT_BACKGROUND.copy(), has_pseudocounts=True, consensus="".join(consensus))
