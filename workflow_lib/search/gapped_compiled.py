"""Compiled (numba) twins of the prefilter's Smith–Waterman blocks in :mod:`workflow_lib.search.gapped`
(the gapped stage of the HHblits prefilter, Remmert et al. 2012, Nat. Methods 9:173: affine gaps, open 5 bits,
extend 1 bit).

Same inputs and outputs as :func:`~workflow_lib.search.gapped._sw_block` and
:func:`~workflow_lib.search.gapped._banded_block`; the recurrences are Gotoh's as in
:func:`~workflow_lib.search.gapped.smith_waterman_reference` (``E`` along the target, ``F`` along the query,
``H = max(0, H(i−1, j−1) + s, E, F)``), run for all lanes of a block at once: rows are query positions, the
innermost loop runs over the lanes (contiguous float32), which LLVM vectorises. The NumPy blocks solve the
in-row ``E`` chain as a prefix scan over ``H' + j·extend``; here it is the plain recurrence, so a score can
differ from the NumPy block's in the last float32 bits (the tests compare both with the reference at 1e-3
bits). Used by :mod:`workflow_lib.search.gapped` when :func:`workflow_lib.aligner.compiled.available`.

Stage 2 runs :func:`sw_striped_compiled` instead of the lane block: one target at a time, the query in
Farrar's striped layout (Farrar 2007, Bioinformatics 23:156): :data:`STRIPE_LANES` lanes, lane ``v`` holding
query positions ``v · seg … v · seg + seg − 1``, so a target residue's scores are one contiguous row of a
query profile (no gather per cell, the lane block's cost), with the vertical gap chain carried across lanes by
Farrar's lazy-F loop. Every value is computed by the same float32 operations as in the lane block (``max`` is
exact and the loop only adds the same ``F − extend`` steps), so the scores are the lane block's, bit for bit.

The kernels repeat the cell update (E, H, the lane's best) on purpose: a shared jitted helper would have to be
a closure (numba did not type it) or a module-level function (numba imported with this module, which must import
without it).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from workflow_lib.aligner.device import numba_module

STRIPE_LANES = 16
"""Lanes of the striped Smith–Waterman (two AVX2 float32 vectors; 8 measured slower and 32 no faster,
benchmarks/RESULTS.md, "Homology search: the striped Smith–Waterman")."""
_STRIPE_PAD = -1.0e4
"""Profile score of the pad positions past the query's end (they follow every real row, so no pad cell can
exceed a real cell's score)."""


@lru_cache(maxsize=None)
def _kernels():
    numba = numba_module()
    jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"nnan", "nsz"})

    @jit
    def sw_block(table, packed, gap_open, gap_extend):
        """Full Smith–Waterman of ``packed`` ``[W, T]`` (positions × lanes) against ``table`` ``[Lq, 22]``."""
        width, n_targets = packed.shape
        open_ = np.float32(gap_open)
        ext = np.float32(gap_extend)
        zero = np.float32(0.0)
        ninf = np.float32(-np.inf)
        h_prev = np.zeros((width + 1, n_targets), np.float32)
        h_cur = np.zeros((width + 1, n_targets), np.float32)
        f = np.full((width, n_targets), ninf, np.float32)
        e = np.empty(n_targets, np.float32)
        h_left = np.empty(n_targets, np.float32)   # H(i, j − 1): a separate buffer, so LLVM sees no overlap
        gathered = np.empty(n_targets, np.float32)
        best = np.zeros(n_targets, np.float32)
        for i in range(table.shape[0]):
            row = table[i]
            for t in range(n_targets):
                e[t] = ninf
                h_left[t] = zero
            for j in range(1, width + 1):
                codes = packed[j - 1]
                for t in range(n_targets):
                    gathered[t] = row[codes[t]]
                diag = h_prev[j - 1]
                up = h_prev[j]
                out = h_cur[j]
                f_col = f[j - 1]
                for t in range(n_targets):
                    a = up[t] - open_
                    b = f_col[t] - ext
                    fv = a if a > b else b
                    f_col[t] = fv
                    a = h_left[t] - open_
                    b = e[t] - ext
                    ev = a if a > b else b
                    e[t] = ev
                    h = diag[t] + gathered[t]
                    h = h if h > fv else fv
                    h = h if h > ev else ev
                    h = h if h > zero else zero
                    out[t] = h
                    h_left[t] = h
                    best[t] = h if h > best[t] else best[t]
            h_prev, h_cur = h_cur, h_prev
        return best

    @jit
    def banded_block(flat, n_codes, rows, codes, band, gap_open, gap_extend):
        """Banded Smith–Waterman of one block (``codes`` ``[rows + band, T]``, lanes reading their query's
        score rows of ``flat`` at ``codes + i · n_codes``), in sheared coordinates: band offset d, a match keeps
        d, ``E`` comes from offset d − 1 of the same row, ``F`` from offset d + 1 of the previous row."""
        n_targets = codes.shape[1]
        open_ = np.float32(gap_open)
        ext = np.float32(gap_extend)
        open_minus_ext = np.float32(gap_open - gap_extend)
        zero = np.float32(0.0)
        ninf = np.float32(-np.inf)
        h_prev = np.full((band + 1, n_targets), ninf, np.float32)
        h_cur = np.full((band + 1, n_targets), ninf, np.float32)
        for d in range(band):
            for t in range(n_targets):
                h_prev[d, t] = zero
        f_prev = np.full((band + 1, n_targets), ninf, np.float32)
        f_cur = np.full((band + 1, n_targets), ninf, np.float32)
        e = np.empty(n_targets, np.float32)
        h_left = np.empty(n_targets, np.float32)   # H(i, d − 1): a separate buffer, so LLVM sees no overlap
        gathered = np.empty(n_targets, np.float32)
        best = np.zeros(n_targets, np.float32)
        for i in range(rows):
            base = i * n_codes
            for t in range(n_targets):
                e[t] = ninf
                h_left[t] = ninf
            for d in range(band):
                row_codes = codes[i + d]
                for t in range(n_targets):
                    gathered[t] = flat[row_codes[t] + base]
                diag = h_prev[d]
                up_h = h_prev[d + 1]
                up_f = f_prev[d + 1]
                out = h_cur[d]
                f_out = f_cur[d]
                for t in range(n_targets):
                    a = up_h[t] - open_minus_ext
                    b = up_f[t]
                    fv = (a if a > b else b) - ext
                    f_out[t] = fv
                    a = h_left[t] - open_
                    b = e[t] - ext
                    ev = a if a > b else b
                    e[t] = ev
                    h = diag[t] + gathered[t]
                    h = h if h > fv else fv
                    h = h if h > ev else ev
                    h = h if h > zero else zero
                    out[t] = h
                    h_left[t] = h
                    best[t] = h if h > best[t] else best[t]
            h_prev, h_cur = h_cur, h_prev
            f_prev, f_cur = f_cur, f_prev
        return best

    @jit
    def band_codes(residues, starts, lengths, first, base, span, n_amino):
        """``[span, T]``: lane ``t``'s residue code at target position ``first[t] + p`` (at most ``n_amino``;
        ``n_amino + 1`` outside the target) plus ``base[t]``."""
        n_targets = starts.size
        codes = np.empty((span, n_targets), np.intp)
        for p in range(span):
            row = codes[p]
            for t in range(n_targets):
                position = first[t] + p
                code = n_amino + 1
                if position >= 0 and position < lengths[t]:
                    code = residues[starts[t] + position]
                    code = code if code < n_amino else n_amino
                row[t] = code + base[t]
        return codes

    lanes = STRIPE_LANES
    pad_score = np.float32(_STRIPE_PAD)

    @jit
    def sw_striped(table, residues, starts, lengths, gap_open, gap_extend):
        """Full Smith–Waterman of each target ``residues[starts[t]:starts[t] + lengths[t]]`` against ``table``
        ``[Lq, C]``, the query striped over the lanes; ``[T]`` bits."""
        n_query, n_codes = table.shape
        seg = (n_query + lanes - 1) // lanes
        n = seg * lanes
        profile = np.empty((n_codes, n), np.float32)   # profile[c, s · lanes + v]: query position v · seg + s
        for c in range(n_codes):
            for s in range(seg):
                for v in range(lanes):
                    i = v * seg + s
                    profile[c, s * lanes + v] = table[i, c] if i < n_query else pad_score
        open_ = np.float32(gap_open)
        ext = np.float32(gap_extend)
        zero = np.float32(0.0)
        ninf = np.float32(-np.inf)
        h = np.empty(n, np.float32)      # H of the current column, read before it is overwritten (the diagonal)
        e = np.empty(n, np.float32)      # E of the next column
        vf = np.empty(lanes, np.float32)
        diag = np.empty(lanes, np.float32)
        best = np.empty(lanes, np.float32)
        out = np.zeros(starts.size, np.float32)
        for t in range(starts.size):
            for k in range(n):
                h[k] = zero
                e[k] = ninf
            for v in range(lanes):
                best[v] = zero
            for j in range(lengths[t]):
                p = profile[residues[starts[t] + j]]
                for v in range(lanes - 1, 0, -1):          # segment 0's diagonal: the last segment, a lane down
                    diag[v] = h[n - lanes + v - 1]
                diag[0] = zero
                for v in range(lanes):
                    vf[v] = ninf
                for s in range(seg):
                    o = s * lanes
                    for v in range(lanes):
                        old = h[o + v]
                        hv = diag[v] + p[o + v]
                        ev = e[o + v]
                        fv = vf[v]
                        hv = hv if hv > ev else ev
                        hv = hv if hv > fv else fv
                        hv = hv if hv > zero else zero
                        h[o + v] = hv
                        best[v] = hv if hv > best[v] else best[v]
                        a = hv - open_
                        b = ev - ext
                        e[o + v] = a if a > b else b
                        b = fv - ext
                        vf[v] = a if a > b else b
                        diag[v] = old
                # lazy F: each lane's vertical gap carried into the next lane's rows while it can still raise
                # an H (F ≤ 0 never does, and F ≤ H − open is already covered by the gap opened from H)
                for v in range(lanes - 1, 0, -1):
                    vf[v] = vf[v - 1]
                vf[0] = ninf
                s = 0
                while True:
                    o = s * lanes
                    go = False
                    for v in range(lanes):
                        go |= (vf[v] > h[o + v] - open_) & (vf[v] > zero)
                    if not go:
                        break
                    for v in range(lanes):
                        fv = vf[v]
                        if fv > h[o + v]:
                            h[o + v] = fv
                            a = fv - open_
                            e[o + v] = a if a > e[o + v] else e[o + v]
                            best[v] = fv if fv > best[v] else best[v]
                        vf[v] = fv - ext
                    s += 1
                    if s == seg:
                        s = 0
                        for v in range(lanes - 1, 0, -1):
                            vf[v] = vf[v - 1]
                        vf[0] = ninf
            top = zero
            for v in range(lanes):
                top = best[v] if best[v] > top else top
            out[t] = top
        return out

    return sw_block, banded_block, band_codes, sw_striped


def sw_block_compiled(table: np.ndarray, packed: np.ndarray, gap_open: float, gap_extend: float) -> np.ndarray:
    """:func:`~workflow_lib.search.gapped._sw_block`, compiled: ``[T]`` bits (float32)."""
    sw_block = _kernels()[0]
    return sw_block(np.ascontiguousarray(table, dtype=np.float32), np.ascontiguousarray(packed, dtype=np.intp),
                    float(gap_open), float(gap_extend))


def banded_block_compiled(flat: np.ndarray, n_codes: int, rows: int, codes: np.ndarray, band: int,
                          gap_open: float, gap_extend: float) -> np.ndarray:
    """:func:`~workflow_lib.search.gapped._banded_block`, compiled: ``[T]`` bits (float32)."""
    banded_block = _kernels()[1]
    return banded_block(np.ascontiguousarray(flat, dtype=np.float32), int(n_codes), int(rows),
                        np.ascontiguousarray(codes, dtype=np.intp), int(band), float(gap_open), float(gap_extend))


def _concatenated(targets: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The targets as one uint8 array, with each one's start and length (int64) in it."""
    lengths = np.fromiter((t.size for t in targets), dtype=np.int64, count=len(targets))
    starts = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    residues = np.concatenate(targets).astype(np.uint8, copy=False) if targets else np.zeros(0, np.uint8)
    return residues, starts, lengths


def band_codes_compiled(targets: list[np.ndarray], first: np.ndarray, base: np.ndarray, span: int,
                        n_amino: int) -> np.ndarray:
    """:func:`~workflow_lib.search.gapped.band_codes`, compiled: ``[span, T]`` intp codes."""
    residues, starts, lengths = _concatenated(targets)
    return _kernels()[2](residues, starts, lengths, np.asarray(first, dtype=np.int64),
                         np.asarray(base, dtype=np.int64), int(span), int(n_amino))


def sw_striped_compiled(table: np.ndarray, targets: list[np.ndarray], gap_open: float, gap_extend: float,
                        max_code: int | None = None) -> np.ndarray:
    """Stage 2's scores, :func:`~workflow_lib.search.gapped._sw_block`'s to the bit, one target at a time with
    the query striped over :data:`STRIPE_LANES` lanes: ``table`` ``[Lq, C]`` bits, ``targets`` codes (clipped to
    ``max_code`` when given, else below ``C``); ``[T]`` bits (float32, 0 for an empty target)."""
    residues, starts, lengths = _concatenated(targets)
    if max_code is not None:
        residues = np.minimum(residues, np.uint8(max_code))
    return _kernels()[3](np.ascontiguousarray(table, dtype=np.float32), residues, starts, lengths,
                         float(gap_open), float(gap_extend))
