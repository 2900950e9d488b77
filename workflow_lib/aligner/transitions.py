"""The seven transitions of a profile HMM and their column order in every transition array.

A profile stores its transitions as ``[L + 1, 7]`` arrays in the order of :data:`TRANSITIONS` (as in ``.hhm``
files); the score tables and every Viterbi kernel index them with :data:`MM` … :data:`DD`. Kept in a module of
their own so that the kernels read the order without importing the profile construction.
"""

from __future__ import annotations

TRANSITIONS = ("M->M", "M->I", "M->D", "I->M", "I->I", "D->M", "D->D")
"""Transition names, in column order."""
MM, MI, MD, IM, II, DM, DD = range(7)
"""Column of each transition in a transition array."""
