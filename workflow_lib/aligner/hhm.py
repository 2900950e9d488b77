"""Read and write HH-suite ``.hhm`` text profiles (the format ``hhmake`` 3.x writes).

Layout: header lines (``HHsearch 1.5``, ``NAME``, ``LENG``, ``NEFF`` ...), an optional ``SEQ`` block of FASTA
records (``>ss_pred``, ``>ss_conf``, ``>Consensus``, then the member sequences) ended by ``#``, the ``NULL`` line
(background, 20 values), the ``HMM`` header (20 residues), the transition header
(``M->M M->I M->D I->M I->I D->M D->D Neff Neff_I Neff_D``), the begin-state transition line, then per
match column one emission line (``<residue> <i>`` + 20 values + ``<i>``) and one transition line, and ``//``.

Values are integers ``-1000·log2(p)``; ``*`` means p = 0. The three Neff columns are ``1000·Neff``. Profiles
written by ``hhmake`` carry no pseudocounts; :func:`read_hhm` returns them with ``has_pseudocounts=False``
(HH-suite adds pseudocounts when it loads a profile; so does the aligner, see
:func:`workflow_lib.aligner.profile.add_pseudocounts`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workflow_lib.aligner.profile import Profile
from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import AMINO_ACIDS, GAP_CODE, N_AMINO, X_CODE, encode
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.fasta import open_text

HHM_SCALE = 1000.0
_TRANSITION_HEADER = "M->M\tM->I\tM->D\tI->M\tI->I\tD->M\tD->D\tNeff\tNeff_I\tNeff_D"


def _probability(token: str) -> float:
    return 0.0 if token == "*" else float(2.0 ** (-int(token) / HHM_SCALE))


def _neff(token: str) -> float:
    return 0.0 if token == "*" else int(token) / HHM_SCALE


def _fasta_block(lines: list[str]) -> list[tuple[str, str]]:
    records: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith(">"):
            records.append((line[1:].strip(), []))
        elif records and line.strip():
            records[-1][1].append(line.strip())
    return [(header, "".join(parts)) for header, parts in records]


def read_hhm(path: str | Path) -> Profile:
    """Read the first profile of an ``.hhm`` file (plain or .gz). Raises InputError on malformed input."""
    path = Path(path)
    with open_text(path) as handle:
        lines = handle.read().splitlines()
    name, description, neff_header = path.stem, "", None
    seq_lines: list[str] = []
    index = 0
    in_seq = False
    while index < len(lines):
        line = lines[index]
        if line.startswith("NULL"):
            break
        if in_seq:
            if line.startswith("#"):
                in_seq = False
            else:
                seq_lines.append(line)
        elif line.startswith("NAME"):
            full = line[4:].strip()
            name, _, description = full.partition(" ")
        elif line.startswith("NEFF"):
            try:
                neff_header = float(line.split()[1])
            except (IndexError, ValueError):
                raise InputError(f"bad NEFF line {index + 1}", path=path) from None
        elif line.startswith("SEQ"):
            in_seq = True
        index += 1
    else:
        raise InputError("no NULL line: not an HH-suite .hhm profile", path=path)
    try:
        background = np.array([_probability(t) for t in lines[index].split()[1:21]], dtype=np.float64)
        if background.size != N_AMINO or not lines[index + 1].startswith("HMM"):
            raise ValueError("bad NULL/HMM header")
        header = lines[index + 1].split()[1:21]
        if "".join(header) != AMINO_ACIDS:
            raise ValueError(f"unexpected residue order {''.join(header)}")
        begin = lines[index + 3].split()
        transitions = [[_probability(t) for t in begin[:7]]]
        neffs = [[_neff(t) for t in begin[7:10]]]
        emissions, residues = [], []
        row = index + 4
        while row < len(lines) and not lines[row].startswith("//"):
            if not lines[row].strip():
                row += 1
                continue
            fields = lines[row].split()
            if len(fields) < 22 or int(fields[1]) != len(emissions) + 1:
                raise ValueError(f"bad emission line {row + 1}")
            residues.append(fields[0])
            emissions.append([_probability(t) for t in fields[2:22]])
            tfields = lines[row + 1].split()
            if len(tfields) < 10:
                raise ValueError(f"bad transition line {row + 2}")
            transitions.append([_probability(t) for t in tfields[:7]])
            neffs.append([_neff(t) for t in tfields[7:10]])
            row += 2
        if not emissions:
            raise ValueError("no match columns")
    except (IndexError, ValueError) as error:
        raise InputError(f"malformed .hhm profile: {error}", path=path) from None
    emission_array = np.asarray(emissions, dtype=np.float64)
    sums = emission_array.sum(axis=1, keepdims=True)
    if np.any(sums <= 0):
        raise InputError("a match column has no emission probability", path=path)
    column_neff = np.asarray(neffs, dtype=np.float32)
    # The begin row's Neff is written as '*'; HH-suite treats the begin state as well determined.
    if not column_neff[0].any():
        column_neff[0] = (column_neff[1:, 0].mean(), 0.0, 0.0)
    records = _fasta_block(seq_lines)
    record_map = {header.split()[0]: sequence for header, sequence in records}
    try:
        sequence = encode("".join(residues))
    except ValueError as error:
        raise InputError(f"bad residue in emission lines: {error}", path=path) from None
    sequence[sequence == GAP_CODE] = X_CODE  # a seed sequence deleted at a match column is written as '-'
    return Profile(name=name, sequence=sequence, emissions=(emission_array / sums).astype(np.float32),
                   transitions=np.asarray(transitions, dtype=np.float32), column_neff=column_neff,
                   neff=float(neff_header if neff_header is not None else column_neff[1:, 0].mean()),
                   background=(background / background.sum()).astype(np.float32), has_pseudocounts=False,
                   description=description, consensus=record_map.get("Consensus"),
                   ss_pred=record_map.get("ss_pred"), ss_conf=record_map.get("ss_conf"))


def _millibits(probabilities: np.ndarray) -> list[str]:
    out = []
    for p in np.asarray(probabilities, dtype=np.float64):
        out.append("*" if p <= 0 else str(int(round(-HHM_SCALE * np.log2(p)))))
    return out


def _neff_tokens(values: np.ndarray) -> list[str]:
    return [str(int(round(HHM_SCALE * float(v)))) for v in values]


def format_hhm(profile: Profile) -> str:
    """The ``.hhm`` text of a profile (see the module docstring)."""
    lines = ["HHsearch 1.5", f"NAME  {profile.name} {profile.description}".rstrip(),
             f"LENG  {profile.length} match states, {profile.length} columns in multiple alignment",
             f"NEFF  {profile.neff:.1f}", "SEQ"]
    for key, value in (("ss_pred", profile.ss_pred), ("ss_conf", profile.ss_conf),
                       ("Consensus", profile.consensus)):
        if value:
            lines += [f">{key}", value]
    lines += [f">{profile.name}", profile.query, "#"]
    lines.append("NULL   " + "\t".join(_millibits(profile.background)) + "\t")
    lines.append("HMM    " + "\t".join(AMINO_ACIDS) + "\t")
    lines.append("       " + _TRANSITION_HEADER)
    lines.append("       " + "\t".join(_millibits(profile.transitions[0]) + ["*", "*", "*"]) + "\t")
    for column in range(profile.length):
        number = column + 1
        lines.append(f"{profile.query[column]} {number:<4d} " + "\t".join(_millibits(profile.emissions[column]))
                     + f"\t{number}")
        lines.append("       " + "\t".join(_millibits(profile.transitions[number])
                                            + _neff_tokens(profile.column_neff[number])) + "\t")
        lines.append("")
    lines.append("//")
    return "\n".join(lines) + "\n"


def write_hhm(path: str | Path, profile: Profile) -> None:
    """Write ``profile`` as an ``.hhm`` file (atomically)."""
    write_text_atomic(path, format_hhm(profile))
