"""Build the sample term of data/sample_term/: a class of lab 1 as Canvas gives it.

What an instructor has at the end of lab 1's week, for the README's walk
through a term (`make demo` grades it too) and tests/test_term.py:

- ``lab1_canvas.zip``: Canvas's "Download Submissions" of lab 1, made of
  data/sample_submissions/lab1's notebooks under Canvas's file names, with
  the times Canvas's zip stores (New York wall-clock time): an on-time, a late
  (``LATE``), an extended, a within-grace, a resubmitted (``-1``) and a
  stranger's submission (not on the roster);
- ``roster.csv``: the course's Canvas gradebook export (Grades > Export), with
  an enrolled student who sent nothing and Canvas's test student;
- ``course.toml``: the due date of lab 1 and the late policy;
- ``extensions.csv``: one student's extension;
- ``overrides.csv``: an instructor's score and note.

Run ``python data/sample_term/build.py`` after changing the lab 1 samples;
the files are written byte for byte the same each time.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "sample_submissions" / "lab1"

#: (Canvas file name, sample notebook, zip time in New York): due 2026-10-05 23:59.
MEMBERS = [
    # on time
    ("ablealice_101_9001_lab1_attention.ipynb", "alice.ipynb", (2026, 10, 5, 20, 0, 0)),
    # 1 day 2 h late: 2 days at 10%
    ("brownbob_LATE_102_9002_lab1_attention.ipynb", "bob.ipynb", (2026, 10, 7, 2, 0, 0)),
    # 30 minutes late, with a 1-day extension: on time
    ("chencarol_LATE_103_9003_lab1_attention.ipynb", "carol.ipynb", (2026, 10, 6, 0, 29, 0)),
    # dave resubmitted: Canvas names the second file "-1"; the one with answers is graded
    ("doedave_104_9004_lab1_attention.ipynb", "dave.ipynb", (2026, 10, 4, 9, 0, 0)),
    ("doedave_104_9014_lab1_attention-1.ipynb", "frank.ipynb", (2026, 10, 5, 9, 0, 0)),
    # 10 minutes late: within the 15 minutes' grace
    ("eveerin_LATE_105_9005_lab1_attention.ipynb", "erin/Copy of lab1_attention.ipynb",
     (2026, 10, 6, 0, 9, 0)),
    # not on the roster (a student who dropped the course, or a stray file)
    ("mallorymal_555_9555_lab1_attention.ipynb", "alice.ipynb", (2026, 10, 5, 10, 0, 0)),
]

ROSTER = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Lab 1 (4321)\n"
    "    Points Possible,,,,,10.00\n"
    '"Able, Alice",101,S101,aable,Section A,\n'
    '"Brown, Bob",102,S102,bbrown,Section A,\n'
    '"Chen, Carol",103,S103,cchen,Section B,\n'
    '"Doe, Dave",104,S104,ddoe,Section B,\n'
    '"Eve, Erin",105,S105,eeve,Section B,\n'
    '"Zed, Zoe",106,S106,zzed,Section A,\n'
    '"Student, Test",999,,,Section A,\n'
)

COURSE = """\
# The sample term's course settings (the kit's own course.toml has the same
# [deadlines] and [late] sections, empty until you set them).

[deadlines]
timezone = "America/New_York"
lab1 = "2026-10-05 23:59"

[late]
grace_minutes = 15
penalty_percent = 10
per = "day"
max_penalty_percent = 50
extensions = "extensions.csv"
"""

EXTENSIONS = "student_id,lab,days\ncchen,lab1,1\n"

OVERRIDES = ("student_id,exercise,score,note,by\n"
             "aable,softmax,1,Copied the loop from the lecture notes without citing,Dr Smith\n")


def build(folder: Path = HERE) -> list[Path]:
    """Write the sample term into ``folder``; the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    archive_path = folder / "lab1_canvas.zip"
    with zipfile.ZipFile(archive_path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, sample, when in MEMBERS:
            info = zipfile.ZipInfo(name, date_time=when)
            info.external_attr = 0o644 << 16
            archive.writestr(info, (SAMPLES / sample).read_bytes())
    written = [archive_path]
    for name, text in (("roster.csv", ROSTER), ("course.toml", COURSE),
                       ("extensions.csv", EXTENSIONS), ("overrides.csv", OVERRIDES)):
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written


if __name__ == "__main__":
    for path in build():
        print(f"wrote {path.relative_to(HERE.parent.parent)}")
