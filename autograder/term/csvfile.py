"""The small CSV files an instructor keeps (extensions, times, overrides), read one way.

UTF-8 (with or without the BOM Excel writes), a first line naming the
columns (matched without case or surrounding spaces), every cell stripped,
blank rows skipped; each row comes with its line number, for messages that
say where to look.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path


def read_rows(path: Path, required: tuple[str, ...], what: str,
              header_hint: str = "") -> list[tuple[int, dict[str, str]]]:
    """[(line number, {column: cell})] of the CSV ``path``.

    ``what`` names the file in messages ("extensions"); ``header_hint`` is
    the first line to suggest when a column is missing (default: the
    required columns).

    Raises:
        ValueError: the file is missing, not UTF-8, or lacks a required
            column; the message says what to give instead.
    """
    path = Path(path)
    hint = header_hint or ",".join(required)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ValueError(f"The {what} file {path} does not exist; give the path of a CSV "
                         f"whose first line is {hint}.") from None
    except UnicodeDecodeError:
        raise ValueError(f"The {what} file {path} is not UTF-8 text; save it as CSV "
                         f"(UTF-8).") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = [name.strip().lower() for name in next(reader, [])]
    missing = [name for name in required if name not in header]
    if missing:
        raise ValueError(f"The {what} file {path} has no column {', '.join(missing)}; its "
                         f"first line must name the columns: {hint}.")
    rows: list[tuple[int, dict[str, str]]] = []
    while True:
        start = reader.line_num + 1          # a quoted cell may span several lines
        cells = next(reader, None)
        if cells is None:
            return rows
        row = {name: value.strip() for name, value in zip(header, cells) if name}
        if any(row.values()):
            rows.append((start, row))
