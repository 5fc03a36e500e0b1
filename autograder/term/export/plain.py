"""The plain CSV export (``to="csv"``): grades.csv and a zip of each student's
feedback page.

Part of autograder.term.export.
"""

from __future__ import annotations

from pathlib import Path

from autograder.text import csv_text, format_score, safe_filename, unique_name
from autograder.term.export.common import (FEEDBACK_NAME, Exported, _feedback_page,
                                           _late_hours, _score, _value, _write_csv, _zip)
from autograder.term.model import ClassRow


CSV_COLUMNS = ["student_id", "name", "email", "section", "lab", "score", "raw_score",
               "max_score", "late", "penalty", "status", "submitted_at"]


def _plain(out_dir: Path, rows: list[ClassRow], dest: Path, exported: Exported) -> None:
    table, used = [], set[str]()
    for row in rows:
        s = row.student
        table.append([csv_text(s.student_id), csv_text(s.name), csv_text(s.email),
                      csv_text(s.section), csv_text(row.lab),
                      _score(row, _value(row, exported.late)),
                      _score(row, row.raw_score), format_score(row.max_score), _late_hours(row),
                      format_score(row.penalty), csv_text(row.status),
                      csv_text(row.submitted_at)])
        page = _feedback_page(out_dir, row, exported)
        if page is None:
            continue
        relative = f"feedback/{unique_name(safe_filename(s.student_id), used)}.zip"
        exported.files[relative] = _zip(dest / relative, [(FEEDBACK_NAME, page)])
        exported.feedback += 1
    exported.files["grades.csv"] = _write_csv(dest / "grades.csv", CSV_COLUMNS, table)
    exported.grades = len(rows)
