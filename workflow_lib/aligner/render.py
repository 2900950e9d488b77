"""Turn a :class:`~workflow_lib.aligner.scores.Hit` into aligned strings (query row, target row).

Match steps show both residues; sequence–profile ``I`` (target residue in an insert state) and profile–profile
``J``/``G`` (template column without a query column) show ``-`` in the query row; ``D`` and profile–profile ``I``
(query column without a template column) show ``-`` in the target row. Insert residues are lower case.

:func:`hit_row` writes one sequence–profile hit as a query-anchored A3M row (the MSA assembly's and the
clustering's rows).
"""

from __future__ import annotations

from workflow_lib.aligner.scores import Hit

QUERY_ONLY = {"seq": "D", "profile": "DI"}
TARGET_ONLY = {"seq": "I", "profile": "JG"}


def aligned_strings(hit: Hit, query: str, target: str, *, mode: str = "seq") -> tuple[str, str]:
    """``(query_row, target_row)`` of equal length for a hit with a backtrace (``mode``: seq or profile)."""
    if mode not in QUERY_ONLY:
        raise ValueError(f"mode must be 'seq' or 'profile', not {mode!r}")
    if not hit.states:
        return "", ""
    i, j = hit.query_start, hit.target_start
    query_row, target_row = [], []
    for letter in hit.states:
        if letter == "M":
            query_row.append(query[i])
            target_row.append(target[j])
            i, j = i + 1, j + 1
        elif letter in QUERY_ONLY[mode]:
            query_row.append(query[i])
            target_row.append("-")
            i += 1
        elif letter in TARGET_ONLY[mode]:
            query_row.append("-")
            target_row.append(target[j].lower())
            j += 1
        else:
            raise ValueError(f"unknown state {letter!r} for mode {mode}")
    return "".join(query_row), "".join(target_row)


def hit_row(states: str, qstart: int, qend: int, tseq: str, query_length: int) -> str:
    """The A3M row of one hit (1-based inclusive ``qstart``/``qend``; ``tseq``: the aligned target segment)."""
    pieces = ["-" * (qstart - 1)]
    position = 0
    for state in states:
        if state == "M":
            pieces.append(tseq[position].upper())
            position += 1
        elif state == "I":
            pieces.append(tseq[position].lower())
            position += 1
        elif state == "D":
            pieces.append("-")
        else:
            raise ValueError(f"unknown alignment state {state!r}")
    pieces.append("-" * (query_length - qend))
    return "".join(pieces)
