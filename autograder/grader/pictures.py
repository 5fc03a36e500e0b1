"""Pictures of what differs: the student's matrix beside the expected one.

When a property of an exercise whose answer is a matrix fails (attention
weights, masks, positional tables, rotary outputs), the grader asks the test
kernel, once the notebook has run, for the student's values on the
notebook's own visible example (autograder.testkernel.pictures, declared per
lab in ``solutions/<lab>/pictures.py``) and draws them here as inline SVG
heatmaps, the differing cells outlined: no external file, no script, no
network.

What comes back from the student's kernel is the student's data, read as
numbers only (``parse``) and drawn as colours only: every value is clipped
to the picture's fixed scale and put in one of ``LEVELS`` colours, no
number of the student's is written on the page, and only the public
example's shape (or one of the recognised mistakes' shapes) is drawn, at
most ``MAX_SIDE`` x ``MAX_SIDE`` cells a panel and ``MAX_PANELS`` panels.
A notebook that answers the picture's call with values it kept from a
hidden test therefore shows at most a few bits a cell of them, in a
picture of a few dozen cells; and those values are drawn anew for every
run and every submission (docs/security.md, "Pictures").
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import textwrap
from dataclasses import dataclass, field

import numpy as np

#: The largest side of a panel drawn; a larger matrix is cropped (with a note).
MAX_SIDE = 32
#: The most panels (heads, sentences) a picture draws.
MAX_PANELS = 4
#: The most cells a picture draws, its panels' together (a panel of 32 x 32,
#: the student's and the expected, is 2,048): about 20 bytes of SVG a cell.
MAX_CELLS = 4096
#: Colours of the scale: the student's values are drawn in one of these.
LEVELS = 9
#: The longest text (title, labels, note) kept, in characters.
MAX_TEXT = 600
#: Characters of a line of the title and the note (wrapped: SVG text does not wrap).
TEXT_COLUMNS = 92
#: Pixels of a cell, by the panel's largest side.
CELL_PX = ((8, 18), (16, 12), (MAX_SIDE, 8))
#: A cell differs where |student - expected| > DIFFERS_ATOL + DIFFERS_RTOL |expected|.
DIFFERS_ATOL, DIFFERS_RTOL = 1e-4, 1e-3

_SEQUENTIAL = ((255, 255, 255), (8, 48, 107))        # 0 .. 1: white to dark blue
_DIVERGING = ((33, 102, 172), (255, 255, 255), (178, 24, 43))  # -1 .. 1: blue, white, red
_NAN = "#9e9e9e"
_MARK = "#e6550d"


@dataclass
class Panel:
    """One pair of heatmaps: the student's values (None when the call gave
    none) and the expected ones, both 2-D."""

    label: str
    expected: np.ndarray
    student: np.ndarray | None = None


@dataclass
class Picture:
    """What one exercise's picture draws (from the test kernel's JSON)."""

    title: str
    rows: str = ""
    cols: str = ""
    scale: tuple[float, float] = (0.0, 1.0)
    note: str = ""
    panels: list[Panel] = field(default_factory=list)


def _text(value, limit: int = MAX_TEXT) -> str:
    """A label as plain text of at most ``limit`` characters (no control characters)."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(value or ""))
    return text if len(text) <= limit else text[:limit - 1].rsplit(" ", 1)[0] + "…"


def _matrix(value) -> np.ndarray | None:
    """A 2-D float matrix from nested lists of numbers (None for anything else),
    at most MAX_SIDE + 1 a side (what is beyond is cropped anyway)."""
    if value is None:
        return None
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return None
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or 0 in array.shape:
        return None
    return array


def parse(text: str) -> dict[str, Picture]:
    """The test kernel's answer (JSON: exercise -> picture), read as plain
    data: strings cut to MAX_TEXT, matrices of numbers, at most MAX_PANELS
    panels; anything else is dropped."""
    try:
        found = json.loads(text)
    except (TypeError, ValueError):
        return {}
    pictures: dict[str, Picture] = {}
    if not isinstance(found, dict):
        return pictures
    for exercise, spec in found.items():
        if not isinstance(exercise, str) or not isinstance(spec, dict):
            continue
        try:
            low, high = (float(v) for v in spec.get("scale", (0.0, 1.0)))
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            continue
        panels = []
        for item in (spec.get("panels") or [])[:MAX_PANELS]:
            if not isinstance(item, dict):
                continue
            expected = _matrix(item.get("expected"))
            if expected is None:
                continue
            panels.append(Panel(_text(item.get("label"), 40), expected,
                                _matrix(item.get("student"))))
        if panels:
            pictures[exercise] = Picture(_text(spec.get("title")), _text(spec.get("rows"), 60),
                                         _text(spec.get("cols"), 60), (low, high),
                                         _text(spec.get("note")), panels)
    return pictures


def _colour(level: float, diverging: bool) -> str:
    stops = _DIVERGING if diverging else _SEQUENTIAL
    position = level * (len(stops) - 1)
    index = min(int(position), len(stops) - 2)
    t = position - index
    rgb = [round(a + (b - a) * t) for a, b in zip(stops[index], stops[index + 1])]
    return "#%02x%02x%02x" % tuple(rgb)


def _levels(values: np.ndarray, scale: tuple[float, float]) -> np.ndarray:
    """Each value's level 0 .. LEVELS - 1 on the fixed scale (clipped); -1 for NaN."""
    low, high = scale
    with np.errstate(invalid="ignore"):
        clipped = np.clip((values - low) / (high - low), 0.0, 1.0)
        levels = np.rint(clipped * (LEVELS - 1))
    return np.where(np.isnan(values), -1, levels).astype(int)


def differs(student: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Where the student's value is not the expected one (NaN differs)."""
    with np.errstate(invalid="ignore"):
        close = np.abs(student - expected) <= DIFFERS_ATOL + DIFFERS_RTOL * np.abs(expected)
    return ~close


def _crop(matrix: np.ndarray) -> np.ndarray:
    return matrix[:MAX_SIDE, :MAX_SIDE]


def _heatmap(out: list[str], matrix: np.ndarray, x0: int, y0: int, cell: int,
             scale: tuple[float, float], marks: np.ndarray | None) -> None:
    diverging = scale[0] < 0 < scale[1]
    levels = _levels(_crop(matrix), scale)
    palette = [_colour(i / (LEVELS - 1), diverging) for i in range(LEVELS)]
    rows, cols = levels.shape
    out.append(f'<rect x="{x0 - 1}" y="{y0 - 1}" width="{cols * cell + 2}" '
               f'height="{rows * cell + 2}" fill="none" stroke="#666"/>')
    # One path a colour, a square a cell (a rect a cell took 2.5 times the bytes).
    for level in np.unique(levels):
        fill = _NAN if level < 0 else palette[level]
        squares = "".join(f"M{x0 + j * cell} {y0 + i * cell}h{cell}v{cell}h-{cell}z"
                          for i, j in zip(*np.nonzero(levels == level)))
        out.append(f'<path fill="{fill}" d="{squares}"/>')
    if marks is not None:
        # An outline inside the cell, thin on small cells, so that its colour shows.
        stroke = 2 if cell > 10 else 1
        inner = cell - 2 * stroke
        squares = "".join(f"M{x0 + j * cell + stroke} {y0 + i * cell + stroke}"
                          f"h{inner}v{inner}h-{inner}z"
                          for i, j in zip(*np.nonzero(_crop(marks))))
        if squares:
            out.append(f'<path class="differs" fill="none" stroke="{_MARK}" '
                       f'stroke-width="{stroke}" d="{squares}"/>')


def _cell_px(panel: Panel) -> int:
    """The side of a cell in pixels: larger for a small matrix."""
    side = max(panel.expected.shape + (panel.student.shape if panel.student is not None
                                       else ()))
    return next((px for limit, px in CELL_PX if min(side, MAX_SIDE) <= limit), CELL_PX[-1][1])


def _fmt(value: float) -> str:
    return f"{value:g}".replace("-", "−")


def render(picture: Picture) -> str:
    """The picture as inline SVG markup: for each panel, the student's heatmap
    (differing cells outlined) beside the expected one, a legend of the scale,
    and the note; every text escaped."""
    esc = html.escape
    gap, label_w = 24, 64
    out: list[str] = []
    cropped = False
    # The panels that fit MAX_CELLS cells (the first always does: MAX_SIDE squared, twice).
    budget = MAX_CELLS
    kept: list[Panel] = []
    for panel in picture.panels:
        cells = _crop(panel.expected).size + (0 if panel.student is None
                                              else _crop(panel.student).size)
        if kept and cells > budget:
            break
        budget -= cells
        kept.append(panel)
    left_out = len(picture.panels) - len(kept)
    width, y = 360, 4
    # The title (bold) and the note, wrapped: the picture is an image of its own.
    for weight, text in ((' class="h"', picture.title), ("", picture.note)):
        for line in textwrap.wrap(text, TEXT_COLUMNS):
            out.append(f'<text x="0" y="{y + 12}"{weight}>{esc(line)}</text>')
            width = max(width, 6 * len(line) + 16)
            y += 15
    y += 6 if picture.title or picture.note else 0
    for panel in kept:
        # Each panel at its own cell size: its label, "your values" and "expected"
        # above the two heatmaps.
        cell = _cell_px(panel)
        student_cols = _crop(panel.student).shape[1] if panel.student is not None else 6
        rows = max(_crop(panel.expected).shape[0],
                   _crop(panel.student).shape[0] if panel.student is not None else 1)
        right = label_w + max(student_cols, _crop(panel.expected).shape[1]) * cell + gap
        cropped = cropped or max(panel.expected.shape) > MAX_SIDE or (
            panel.student is not None and max(panel.student.shape) > MAX_SIDE)
        out.append(f'<text x="0" y="{y + 12}">{esc(panel.label)}</text>')
        out.append(f'<text x="{label_w}" y="{y + 12}" class="h">your values</text>')
        out.append(f'<text x="{right}" y="{y + 12}" class="h">expected</text>')
        y += 20
        if panel.student is None:
            out.append(f'<text x="{label_w}" y="{y + 12}">(no values)</text>')
        else:
            marks = (differs(panel.student, panel.expected)
                     if panel.student.shape == panel.expected.shape else None)
            _heatmap(out, panel.student, label_w, y, cell, picture.scale, marks)
        _heatmap(out, panel.expected, right, y, cell, picture.scale, None)
        width = max(width, right + _crop(panel.expected).shape[1] * cell + 8)
        y += rows * cell + 14
    # The legend: the scale's colours, its two ends, the mark.
    diverging = picture.scale[0] < 0 < picture.scale[1]
    out.append(f'<text x="0" y="{y + 10}">scale</text>')
    for i in range(LEVELS):
        out.append(f'<rect x="{label_w + i * 12}" y="{y}" width="12" height="12" '
                   f'fill="{_colour(i / (LEVELS - 1), diverging)}" stroke="#666"/>')
    out.append(f'<text x="{label_w + LEVELS * 12 + 6}" y="{y + 10}">'
               f'{esc(_fmt(picture.scale[0]))} to {esc(_fmt(picture.scale[1]))}; '
               f'grey: not a number</text>')
    y += 18
    out.append(f'<rect x="{label_w}" y="{y}" width="12" height="12" fill="none" '
               f'stroke="{_MARK}" stroke-width="2"/>')
    out.append(f'<text x="{label_w + 18}" y="{y + 10}">differs from the expected value</text>')
    y += 18
    if picture.rows or picture.cols:
        out.append(f'<text x="0" y="{y + 10}">rows: {esc(picture.rows)}; '
                   f'columns: {esc(picture.cols)}</text>')
        y += 18
    if left_out:
        out.append(f'<text x="0" y="{y + 10}">({left_out} more not drawn)</text>')
        y += 18
    if cropped:
        out.append(f'<text x="0" y="{y + 10}">(only the first {MAX_SIDE} rows and columns '
                   f'are drawn)</text>')
        y += 18
    height = y + 4
    title = esc(picture.title)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="picture" role="img" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'style="max-width:100%;height:auto" font-family="sans-serif" font-size="11">'
            f'<title>{title}</title>'
            f'<style>.h{{font-weight:bold}}</style>' + "".join(out) + "</svg>")


#: How a picture starts: an SVG image as a data URI.
DATA_URI = "data:image/svg+xml;base64,"


def data_uri(picture: Picture) -> str:
    """The picture as a ``data:`` URI, for an ``<img>`` of the feedback page: no
    file, no request, and an image that runs no script and loads nothing (a
    browser draws SVG in an ``<img>`` as a still picture); the page's template
    escapes it as any text (no markup passes unescaped)."""
    return DATA_URI + base64.b64encode(render(picture).encode("utf-8")).decode("ascii")


def svg_of(uri: str) -> str:
    """The SVG markup of a picture's data URI (for tests and checks)."""
    return base64.b64decode(uri.removeprefix(DATA_URI)).decode("utf-8")


def text_of(svg: str) -> str:
    """The words of a picture, its lines joined (as escaped in the SVG)."""
    return " ".join(re.findall(r">([^<>]+)</text>", svg))


def pictures_in(page: str) -> list[str]:
    """The SVG markup of every picture of a feedback page."""
    return [svg_of(uri) for uri in re.findall(
        r'<img class="picture" src="(' + re.escape(DATA_URI) + r'[A-Za-z0-9+/=]*)"', page)]


def drawn(text: str) -> dict[str, str]:
    """The feedback page's pictures, by exercise, from the test kernel's JSON
    (the record's ``pictures``): data URIs (data_uri); none where nothing could
    be drawn."""
    drawings = {}
    for exercise, picture in parse(text).items():
        try:
            drawings[exercise] = data_uri(picture)
        except (ValueError, TypeError, IndexError):
            continue
    return drawings


def palette_fills() -> set[str]:
    """Every fill colour a picture may hold: the scales' LEVELS colours and grey."""
    return {_colour(i / (LEVELS - 1), diverging) for i in range(LEVELS)
            for diverging in (False, True)} | {_NAN}
