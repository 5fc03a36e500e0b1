"""Moodle: the record of each worksheet export (OUT/export/moodle/exported.json),
and what an upload of a worksheet an earlier export filled in would skip.

Part of autograder.term.export.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from autograder.term.export.common import MOODLE_ACTIONS, Exported, _who
from autograder.term.model import ClassRow


#: What the worksheet route exported, by worksheet: OUT/export/moodle/exported.json
#: (wherever --dest put the files), so that a later export of the same file
#: says what Moodle will skip.
EXPORT_RECORD = Path("export") / "moodle" / "exported.json"
#: The most exports the record keeps (the newest).
EXPORT_RECORD_SIZE = 50


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load_record(out_dir: Path) -> list[dict]:
    path = out_dir / EXPORT_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["exports"]
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _earlier_export(out_dir: Path, digest: str) -> dict | None:
    """The newest earlier export of the worksheet whose bytes hash to ``digest``
    (as the source filled in, or as the file the kit wrote)."""
    found = [e for e in _load_record(out_dir)
             if digest in (e.get("source_sha256"), e.get("written_sha256"))]
    return found[-1] if found else None


def _record_export(out_dir: Path, entry: dict) -> None:
    path = out_dir / EXPORT_RECORD
    entries = _load_record(out_dir) + [entry]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exports": entries[-EXPORT_RECORD_SIZE:]}, indent=1,
                               ensure_ascii=False), encoding="utf-8")


def _second_upload(source: Path, earlier: dict, rows: list[ClassRow],
                   participants: dict[int, str], grades: dict[str, str],
                   comments: dict[str, str], exported: Exported) -> None:
    """Say what Moodle does with a worksheet an earlier export filled in already.

    Moodle's upload (mod/assign/feedback/offline/locallib.php
    ``process_import_grades``, and its preview, importgradesform.php) reads each
    row's "Last modified (grade)" with ``strtotime`` (``-`` gives false: 0) and
    skips the row, grade and feedback comments alike, when Moodle's grade
    record was modified more than 60 s later (``$stalemodificationdate``),
    unless "Allow updating records ..." is ticked. A worksheet's cell is the
    time of its download (gradingtable.php ``col_timemarked``); an upload makes
    (or updates) each row's grade record, now. So the same file uploaded again
    after a regrade is skipped on every row the first upload set. The preview
    lists only what it will change ("Set grade for ...", 'Set field "Feedback
    comments" for ...': the strings 'gradeupdate', 'feedbackupdate'), never a
    skipped row, and says "No modified grades found in uploaded worksheet"
    ('nochanges') when there is nothing it will change.

    When rows changed since the earlier export, the first step says so and
    what to do (a fresh download with --worksheet); otherwise a note does.
    """
    before_grades = earlier.get("grades") or {}
    before_comments = earlier.get("feedback") or {}
    changed = []
    for row in rows:
        participant = participants[id(row)]
        old, new = before_grades.get(participant), grades.get(participant)
        if old != new:
            changed.append(f"{_who(row)}: {old if old is not None else 'not in it'} -> {new}")
        elif before_comments.get(participant) not in (None, comments.get(participant)):
            changed.append(f"{_who(row)}: its feedback")
    when = earlier.get("exported_at") or "an earlier run"
    record = f"OUT/{EXPORT_RECORD.as_posix()}"
    if not changed:
        exported.notes.append(
            f"{source.name} is the worksheet an earlier export filled in ({when}; {record}), "
            f"and no grade or comment changed since. If that export was uploaded, Moodle has "
            f"them already and this upload changes nothing (\"No modified grades found in "
            f"uploaded worksheet\").")
        return
    shown = "; ".join(changed[:10]) + (f"; and {len(changed) - 10} more"
                                       if len(changed) > 10 else "")
    exported.notes.append(
        f"{source.name} is the worksheet an earlier export filled in ({when}; {record}), and "
        f"{len(changed)} row(s) changed since: {shown}. If that export was uploaded, Moodle "
        f"skips every row it set when this file is uploaded again with \"Allow updating "
        f"records ...\" unticked, these included, and its preview does not list skipped rows: "
        f"download the grading worksheet again and export with --worksheet FILE (step 1).")
    exported.steps.insert(0, (
        f"BEFORE uploading: {source.name} is the same worksheet an earlier export filled in "
        f"({when}). If you uploaded that export, Moodle now holds a grade record for every row "
        f"it set, newer than this file's \"Last modified (grade)\" cells (\"-\" or the times "
        f"of the first download), and with \"Allow updating records that have been modified "
        f"more recently in Moodle than in the spreadsheet\" unticked it skips those rows, "
        f"grade and feedback comments alike: the {len(changed)} changed since would not reach "
        f"Moodle. Its preview lists only the changes it will make (\"Set grade for ...\"), "
        f"never a skipped row, and shows \"No modified grades found in uploaded worksheet\" "
        f"when it skips them all. Download the grading worksheet again (" + MOODLE_ACTIONS +
        " > Download grading worksheet) and export with --worksheet FILE; or tick that box "
        "for this one upload, which also overwrites any grade changed in Moodle since (a "
        "TA's too)."))
