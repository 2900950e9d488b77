"""Per-protein figures of the report pages, drawn without matplotlib so that a proteome of 100,000 proteins
costs milliseconds per page: rasters are encoded as PNG here (:func:`png_bytes`) and framed by inline SVG axes.

- :func:`msa_coverage_svg`: the MSA's rows sorted by identity to the query, each covered column coloured by
  that identity, with the per-column coverage on top (the MSA plot of ColabFold, Mirdita et al. 2022,
  *Nat. Methods* 19:679);
- :func:`distance_map_svg`: the predicted contact probability ``P(d_Cβ < 8 Å)`` from the distogram above the
  diagonal and the top template's contacts (Cβ–Cβ < 8 Å over its aligned residues) below it;
- :func:`alignment_html`: the template alignment, query over template, with identities and similar pairs
  marked as BLAST does.
"""

from __future__ import annotations

import base64
import html
import struct
import warnings
import zlib
from functools import lru_cache

import numpy as np

from workflow_lib.seqio.alphabet import GAP_CODE, encode
from workflow_lib.seqio.msa import Alignment

MAX_MSA_ROWS = 1000
"""Rows drawn in the coverage plot; deeper MSAs are subsampled evenly after sorting by identity."""
MAX_MAP_PIXELS = 600
"""Distance maps of longer proteins are max-pooled to at most this many pixels a side."""


def png_bytes(rgb: np.ndarray) -> bytes:
    """A PNG file (8-bit RGB, no interlace) of a ``uint8 [H, W, 3]`` image."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or 0 in rgb.shape[:2]:
        raise ValueError(f"expected a non-empty [H, W, 3] image, got {rgb.shape}")
    height, width = rgb.shape[:2]
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rgb.reshape(height, width * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
            + chunk(b"IEND", b""))


def png_data_uri(rgb: np.ndarray) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(rgb)).decode("ascii")


@lru_cache(maxsize=8)
def colour_table(name: str) -> np.ndarray:
    """``uint8 [256, 3]`` lookup table of a matplotlib colormap."""
    from matplotlib import colormaps

    return (colormaps[name](np.linspace(0.0, 1.0, 256))[:, :3] * 255).round().astype(np.uint8)


def _apply(values: np.ndarray, name: str) -> np.ndarray:
    index = np.clip(np.nan_to_num(values, nan=0.0) * 255, 0, 255).astype(np.uint8)
    return colour_table(name)[index]


def _ticks(length: int, count: int = 6) -> list[int]:
    """Round residue numbers (1-based) for an axis of ``length`` positions."""
    if length <= 1:
        return [1]
    raw = length / count
    step = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 1 << 30)
                if s >= raw)
    return [1] + list(range(step, length + 1, step))


def _colour_bar(x: float, y: float, height: float, name: str, label: str, low: str, high: str) -> str:
    samples = colour_table(name)[np.linspace(0, 255, 11).astype(int)]
    stops = "".join(f"<stop offset=\"{t:.2f}\" stop-color=\"rgb({r},{g},{b})\"/>"
                    for t, (r, g, b) in zip(np.linspace(0, 1, 11), samples))
    gid = f"bar-{name}"
    return (f"<defs><linearGradient id=\"{gid}\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">{stops}</linearGradient></defs>"
            f"<rect x=\"{x}\" y=\"{y}\" width=\"12\" height=\"{height}\" fill=\"url(#{gid})\" stroke=\"#888\"/>"
            f"<text x=\"{x + 16}\" y=\"{y + 8}\" font-size=\"10\">{high}</text>"
            f"<text x=\"{x + 16}\" y=\"{y + height}\" font-size=\"10\">{low}</text>"
            f"<text x=\"{x + 30}\" y=\"{y + height / 2}\" font-size=\"10\" transform=\"rotate(90 {x + 30} "
            f"{y + height / 2})\" text-anchor=\"middle\">{html.escape(label)}</text>")


def coverage_matrix(alignment: Alignment) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by identity to the query (query first) with identity where covered and NaN at gaps
    ``[N, L]``, and the number of sequences covering each column ``[L]``."""
    matches = alignment.matches
    covered = matches != GAP_CODE
    same = (matches == matches[0]) & covered
    identity = same.sum(axis=1) / np.maximum(covered.sum(axis=1), 1)
    order = np.argsort(-identity, kind="stable")
    values = np.where(covered, identity[:, None], np.nan)[order]
    return values, covered.sum(axis=0)


def msa_identity_image(alignment: Alignment, max_rows: int = MAX_MSA_ROWS) -> tuple[np.ndarray, np.ndarray, int]:
    """``(rgb [R, L, 3], coverage [L], rows)`` of :func:`coverage_matrix`: each row's covered columns coloured by
    its identity to the query (``rainbow_r``: red 0, violet 1), gaps white, highest identity on top, at most
    ``max_rows`` rows (evenly subsampled)."""
    values, coverage = coverage_matrix(alignment)
    if len(values) > max_rows:
        values = values[np.linspace(0, len(values) - 1, max_rows).round().astype(int)]
    rgb = _apply(values, "rainbow_r")
    rgb[np.isnan(values)] = 255
    return rgb, coverage, alignment.depth


def msa_coverage_svg(alignment: Alignment, width: int = 720, height: int = 260) -> str:
    """The coverage figure of an MSA as inline SVG with an embedded PNG."""
    rgb, coverage, rows = msa_identity_image(alignment)
    length = rgb.shape[1]
    left, right, top, bottom = 48, 70, 8, 30
    inner_w, inner_h = width - left - right, height - top - bottom
    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" "
             f"class=\"figure\" aria-label=\"MSA coverage coloured by identity to the query\">",
             f"<image x=\"{left}\" y=\"{top}\" width=\"{inner_w}\" height=\"{inner_h}\" preserveAspectRatio=\"none\" "
             f"style=\"image-rendering:pixelated\" href=\"{png_data_uri(rgb)}\"/>",
             f"<rect x=\"{left}\" y=\"{top}\" width=\"{inner_w}\" height=\"{inner_h}\" fill=\"none\" stroke=\"#444\"/>"]
    xs = left + inner_w * (np.arange(length) + 0.5) / length
    ys = top + inner_h * (1 - coverage / max(rows, 1))
    parts.append(f"<polyline points=\"{' '.join(f'{x:.1f},{y:.1f}' for x, y in zip(xs, ys))}\" fill=\"none\" "
                 f"stroke=\"#000\" stroke-width=\"1.5\"/>")
    for tick in _ticks(length):
        x = left + inner_w * (tick - 0.5) / length
        parts.append(f"<text x=\"{x:.1f}\" y=\"{height - 16}\" font-size=\"10\" text-anchor=\"middle\">{tick}</text>")
    parts.append(f"<text x=\"{left + inner_w / 2}\" y=\"{height - 3}\" font-size=\"10\" text-anchor=\"middle\">"
                 f"query position (black: sequences covering it)</text>")
    parts.append(f"<text x=\"{left - 4}\" y=\"{top + 10}\" font-size=\"10\" text-anchor=\"end\">{rows}</text>"
                 f"<text x=\"{left - 4}\" y=\"{top + inner_h}\" font-size=\"10\" text-anchor=\"end\">1</text>"
                 f"<text x=\"12\" y=\"{top + inner_h / 2}\" font-size=\"10\" text-anchor=\"middle\" "
                 f"transform=\"rotate(-90 12 {top + inner_h / 2})\">sequences</text>")
    parts.append(_colour_bar(left + inner_w + 10, top, inner_h, "rainbow_r", "identity to query", "0", "1"))
    parts.append("</svg>")
    return "".join(parts)


def _pool(matrix: np.ndarray, size: int) -> np.ndarray:
    """Max-pool a square matrix so that its side is at most ``size``."""
    length = matrix.shape[0]
    factor = int(np.ceil(length / size))
    if factor <= 1:
        return matrix
    padded_len = factor * int(np.ceil(length / factor))
    padded = np.full((padded_len, padded_len), np.nan)
    padded[:length, :length] = matrix
    blocks = padded.reshape(padded_len // factor, factor, padded_len // factor, factor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # all-NaN blocks stay NaN
        return np.nanmax(blocks, axis=(1, 3))


def distance_map_image(upper: np.ndarray, lower: np.ndarray | None, size: int = MAX_MAP_PIXELS) -> np.ndarray:
    """``rgb`` of a pair map: ``upper`` (values in 0..1, ``[L, L]``) in greys above the diagonal; ``lower`` (0/1
    template contacts, NaN where the template has no aligned residue) in orange below it, pale grey where not
    covered."""
    length = upper.shape[0]
    rows, cols = np.indices((length, length))
    top = np.where(rows < cols, upper, np.nan)
    if lower is not None:
        bottom = np.where(rows > cols, lower, np.nan)
    else:
        bottom = np.full((length, length), np.nan)
    top, bottom = _pool(top, size), _pool(bottom, size)
    n = top.shape[0]
    rgb = np.full((n, n, 3), 255, np.uint8)
    has_top = np.isfinite(top)
    rgb[has_top] = _apply(top[has_top], "Greys")
    has_bottom = np.isfinite(bottom)
    rgb[has_bottom & (bottom < 0.5)] = (236, 236, 236)
    rgb[has_bottom & (bottom >= 0.5)] = (230, 120, 30)
    rgb[np.eye(n, dtype=bool)] = (200, 200, 200)
    return rgb


def distance_map_svg(upper: np.ndarray, lower: np.ndarray | None, *, upper_label: str, lower_label: str,
                     size: int = 360) -> str:
    """Inline SVG of :func:`distance_map_image` with residue axes and a legend."""
    rgb = distance_map_image(upper, lower)
    length = upper.shape[0]
    left, top, bottom, right = 40, 8, 34, 80
    width, height = left + size + right, top + size + bottom
    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" "
             f"class=\"figure\" aria-label=\"predicted contacts and template contacts\">",
             f"<image x=\"{left}\" y=\"{top}\" width=\"{size}\" height=\"{size}\" preserveAspectRatio=\"none\" "
             f"style=\"image-rendering:pixelated\" href=\"{png_data_uri(rgb)}\"/>",
             f"<rect x=\"{left}\" y=\"{top}\" width=\"{size}\" height=\"{size}\" fill=\"none\" stroke=\"#444\"/>"]
    for tick in _ticks(length, 5):
        offset = size * (tick - 0.5) / length
        parts.append(f"<text x=\"{left + offset:.1f}\" y=\"{top + size + 12}\" font-size=\"10\" "
                     f"text-anchor=\"middle\">{tick}</text>"
                     f"<text x=\"{left - 3}\" y=\"{top + offset + 3:.1f}\" font-size=\"10\" "
                     f"text-anchor=\"end\">{tick}</text>")
    parts.append(f"<text x=\"{left + size / 2}\" y=\"{height - 6}\" font-size=\"10\" text-anchor=\"middle\">"
                 f"upper: {html.escape(upper_label)}; lower: {html.escape(lower_label)}</text>")
    parts.append(_colour_bar(left + size + 10, top, size / 2, "Greys", "contact probability", "0", "1"))
    parts.append(f"<rect x=\"{left + size + 10}\" y=\"{top + size / 2 + 20}\" width=\"12\" height=\"12\" "
                 f"fill=\"rgb(230,120,30)\"/><text x=\"{left + size + 26}\" y=\"{top + size / 2 + 30}\" "
                 f"font-size=\"10\">template</text><text x=\"{left + size + 26}\" y=\"{top + size / 2 + 42}\" "
                 f"font-size=\"10\">contact</text>")
    parts.append("</svg>")
    return "".join(parts)


def alignment_lines(query: str, template: str, states: str, qstart: int, tstart: int,
                    positive: np.ndarray) -> tuple[str, str, str]:
    """The aligned query, marker and template strings of a hit's state string (``M`` both, ``I``/``D`` query
    only, ``J``/``G`` template only), from 0-based ``qstart``/``tstart``; the marker line has ``|`` for
    identical residues, ``+`` for pairs with positive substitution score (``positive[a, b]``), blank else."""
    from workflow_lib.templates.search import QUERY_ONLY, TEMPLATE_ONLY

    query_codes, template_codes = encode(query), encode(template)
    top, middle, bottom = [], [], []
    i, j = qstart, tstart
    for letter in states:
        if letter == "M":
            a, b = query[i], template[j]
            top.append(a)
            bottom.append(b)
            qa, tb = int(query_codes[i]), int(template_codes[j])
            similar = qa < len(positive) and tb < len(positive) and positive[qa, tb]
            middle.append("|" if a == b else "+" if similar else " ")
            i += 1
            j += 1
        elif letter in QUERY_ONLY:
            top.append(query[i])
            middle.append(" ")
            bottom.append("-")
            i += 1
        elif letter in TEMPLATE_ONLY:
            top.append("-")
            middle.append(" ")
            bottom.append(template[j])
            j += 1
        else:
            raise ValueError(f"unknown alignment state {letter!r}")
    return "".join(top), "".join(middle), "".join(bottom)


def alignment_html(query: str, template: str, states: str, qstart: int, tstart: int, *, template_name: str,
                   positive: np.ndarray, width: int = 60) -> str:
    """The alignment as a ``<pre>`` block, ``width`` columns per line, with 1-based start and end numbers."""
    top, middle, bottom = alignment_lines(query, template, states, qstart, tstart, positive)
    label_q, label_t = "query", template_name
    pad = max(len(label_q), len(label_t))
    lines = []
    qi, ti = qstart, tstart
    for start in range(0, len(top), width):
        q_part, m_part, t_part = top[start:start + width], middle[start:start + width], bottom[start:start + width]
        q_used = sum(c != "-" for c in q_part)
        t_used = sum(c != "-" for c in t_part)
        lines.append(f"{label_q:<{pad}} {qi + 1:>5} {q_part} {qi + q_used}")
        lines.append(f"{'':<{pad}} {'':>5} {m_part}")
        lines.append(f"{label_t:<{pad}} {ti + 1:>5} {t_part} {ti + t_used}")
        lines.append("")
        qi += q_used
        ti += t_used
    return "<pre class=\"alignment\">" + html.escape("\n".join(lines)) + "</pre>"
