"""The residue alphabet shared by every stage: 20 amino acids, X (unknown) and the gap, as uint8 codes.

The 20 amino acids are in alphabetical order of their one-letter codes (``ACDEFGHIKLMNPQRSTVWY``), the order of
HH-suite's ``.hhm`` columns and of HMMER, so profiles read from either tool need no reordering.

Input policy for letters outside the 20 (applied by :func:`normalize_residues`, documented in the README):

============  ==========  ==========================================================
letter        becomes     why
============  ==========  ==========================================================
a-z           A-Z         lower case is upper-cased (soft-masking carries no meaning here)
U (Sec)       C           selenocysteine is chemically closest to cysteine (as HH-suite does)
O (Pyl)       K           pyrrolysine is a lysine derivative (as HH-suite does)
B, Z, J       X           ambiguous (D/N, E/Q, I/L): no single residue is right
X             X           unknown
trailing *    (dropped)   a stop codon written by translators
============  ==========  ==========================================================

Anything else (digits, internal ``*``, punctuation, whitespace inside a sequence) is an input error.
"""

from __future__ import annotations

import re

import numpy as np

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
"""The 20 standard amino acids in code order 0..19."""

UNKNOWN = "X"
GAP = "-"
ALPHABET = AMINO_ACIDS + UNKNOWN + GAP
"""Every symbol with a code: 0..19 amino acids, 20 = X, 21 = gap."""

N_AMINO = 20
X_CODE = 20
GAP_CODE = 21
N_CODES = 22

SUBSTITUTES = {"U": "C", "O": "K", "B": "X", "Z": "X", "J": "X"}
"""Non-standard one-letter codes and what they become (see the module docstring)."""

_ENCODE = np.full(256, 255, dtype=np.uint8)
for _code, _letter in enumerate(ALPHABET):
    _ENCODE[ord(_letter)] = _code
    if _letter.isalpha():
        _ENCODE[ord(_letter.lower())] = _code
for _letter, _target in SUBSTITUTES.items():
    _ENCODE[ord(_letter)] = ALPHABET.index(_target)
    _ENCODE[ord(_letter.lower())] = ALPHABET.index(_target)
_ENCODE[ord(".")] = GAP_CODE  # A3M/Stockholm insert-gap filler

_DECODE = np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)

VALID_LETTERS = frozenset(AMINO_ACIDS + UNKNOWN + "".join(SUBSTITUTES))


_INVALID = re.compile("[^" + re.escape("".join(sorted(VALID_LETTERS | {c.lower() for c in VALID_LETTERS}))) + "]")


def first_invalid(sequence: str) -> int | None:
    """0-based index of the first character that is not a residue letter (either case), or None."""
    found = _INVALID.search(sequence)
    return found.start() if found else None


def normalize_residues(sequence: str) -> str:
    """Upper-case and apply :data:`SUBSTITUTES`; the caller has already rejected invalid characters."""
    upper = sequence.upper()
    if any(letter in upper for letter in SUBSTITUTES):
        upper = upper.translate(str.maketrans(SUBSTITUTES))
    return upper


def encode(sequence: str) -> np.ndarray:
    """Residue string to uint8 codes ``[L]``; gaps (``-`` or ``.``) become :data:`GAP_CODE`.

    Raises ValueError naming the first character without a code (callers wrap it into an InputError).
    """
    raw = np.frombuffer(sequence.encode("ascii", errors="replace"), dtype=np.uint8)
    codes = _ENCODE[raw]
    bad = np.flatnonzero(codes == 255)
    if bad.size:
        index = int(bad[0])
        raise ValueError(f"character {sequence[index]!r} at position {index + 1} is not a residue code")
    return codes


def decode(codes: np.ndarray) -> str:
    """uint8 codes to an upper-case residue string (gaps as ``-``)."""
    codes = np.asarray(codes)
    if codes.size and int(codes.max()) >= N_CODES:
        raise ValueError(f"code {int(codes.max())} is outside the alphabet (0..{N_CODES - 1})")
    return _DECODE[codes.astype(np.intp)].tobytes().decode("ascii")
