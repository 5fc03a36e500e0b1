"""Build the sample term of data/sample_term/: a class of lab 1 as Canvas gives it.

What an instructor has at the end of lab 1's week, for the README's walk
through a term (`make demo` grades it too) and tests/term/test_term.py:

- ``lab1_canvas.zip``: Canvas's "Download Submissions" of lab 1, made of
  data/sample_submissions/lab1's notebooks under Canvas's file names, every
  entry stamped with the time the zip was built, ten days after the due
  date, as Canvas's zip is (ZIP_BUILT): an on-time, a late (``LATE``), an
  extended, a within-grace, a resubmitted (``-1``) and a stranger's
  submission (not on the roster);
- ``lab1_submissions.json``: the submission times, as Canvas's submissions
  API gives them (``grade --times``);
- ``roster.csv``: the course's Canvas gradebook export (Grades > Export), with
  an enrolled student who sent nothing and Canvas's test student;
- ``course.toml``: the due date of lab 1 and the late policy;
- ``extensions.csv``: one student's extension;
- ``overrides.csv``: an instructor's score and note;
- ``lab1_moodle.zip`` and ``moodle_worksheet.csv``: a class of 33 as Moodle's
  "Download all submissions" and "Download grading worksheet" give it (two
  participants named Jane Doe, a draft, an extension granted in Moodle);
- ``lab1_gradescope.zip`` and ``gradescope_roster.csv``: a class of 33 as
  Gradescope's "Export Submissions" gives it (a group of three and one of
  two, a student without a SID).

shapes.py builds the LMS files, each rule cited (SOURCES.md quotes them).

Run ``python data/sample_term/build.py`` after changing the lab 1 samples;
the files are written byte for byte the same each time.
"""

from __future__ import annotations

import datetime
import json
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "sample_submissions" / "lab1"

#: (Canvas file name, sample notebook, Canvas user id, attempt, submitted_at as
#: Canvas's API gives it, UTC): due 2026-10-05 23:59 New York, 2026-10-06T03:59:00Z.
MEMBERS = [
    # on time
    ("ablealice_101_9001_lab1_attention.ipynb", "alice.ipynb", 101, 1, "2026-10-06T00:00:00Z"),
    # 1 day 2 h late: 2 days at 10%
    ("brownbob_LATE_102_9002_lab1_attention.ipynb", "bob.ipynb", 102, 1,
     "2026-10-07T06:00:00Z"),
    # 30 minutes late, with a 1-day extension: on time
    ("chencarol_LATE_103_9003_lab1_attention.ipynb", "carol.ipynb", 103, 1,
     "2026-10-06T04:29:00Z"),
    # dave uploaded twice: the zip holds only the latest attempt, which Canvas
    # renamed "-1" (Attachment.make_unique_filename; shapes.canvas_resubmission_name)
    ("doedave_104_9014_lab1_attention-1.ipynb", "frank.ipynb", 104, 2,
     "2026-10-05T13:00:00Z"),
    # 10 minutes late: within the 15 minutes' grace
    ("eveerin_LATE_105_9005_lab1_attention.ipynb", "erin/Copy of lab1_attention.ipynb", 105, 1,
     "2026-10-06T04:09:00Z"),
    # not on the roster (a student who dropped the course, or a stray file)
    ("mallorymal_555_9555_lab1_attention.ipynb", "alice.ipynb", 555, 1,
     "2026-10-05T14:00:00Z"),
]

#: When the instructor pressed "Download Submissions", ten days after the due
#: date. Canvas's ContentZipper adds every file to the zip without a time
#: (canvas-lms app/models/content_zipper.rb, zip_base_folder / add_file), so
#: rubyzip stamps each entry with the time it was written (Zip::Entry#initialize:
#: @time = ::Zip::DOSTime.now): one stamp for all, the server's clock (UTC),
#: whatever the submission times. The kit must not read it as one.
ZIP_BUILT = (2026, 10, 15, 18, 3, 6)

#: Canvas's submissions API for the assignment (GET /api/v1/courses/77/
#: assignments/4321/submissions; canvas-lms lib/api/v1/submission.rb,
#: submission_attempt_json): the latest attempt of each enrolled student,
#: ``submitted_at`` in UTC, null for a student who sent nothing. Mallory, no
#: longer enrolled, is not listed.
def canvas_submissions() -> list[dict]:
    latest = {user: {"submitted_at": when, "attempt": attempt}
              for _, _, user, attempt, when in MEMBERS if user != 555}
    due = datetime.datetime(2026, 10, 6, 3, 59, tzinfo=datetime.timezone.utc)
    out = []
    for user in (101, 102, 103, 104, 105, 106):
        found = latest.get(user)
        when = found["submitted_at"] if found else None
        seconds = max(0, int((datetime.datetime.fromisoformat(when.replace("Z", "+00:00"))
                              - due).total_seconds())) if when else 0
        out.append({"id": 50000 + user, "user_id": user, "assignment_id": 4321,
                    "submitted_at": when, "attempt": found["attempt"] if found else None,
                    "workflow_state": "submitted" if when else "unsubmitted",
                    "late": seconds > 0, "missing": when is None, "seconds_late": seconds,
                    "submission_type": "online_upload" if when else None})
    return out


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
        for name, sample, *_ in MEMBERS:
            info = zipfile.ZipInfo(name, date_time=ZIP_BUILT)
            info.external_attr = 0o644 << 16
            archive.writestr(info, (SAMPLES / sample).read_bytes())
    written = [archive_path]
    times = json.dumps(canvas_submissions(), indent=1) + "\n"
    for name, text in (("lab1_submissions.json", times),
                       ("roster.csv", ROSTER), ("course.toml", COURSE),
                       ("extensions.csv", EXTENSIONS), ("overrides.csv", OVERRIDES)):
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    # A Moodle class (download and grading worksheet) and a Gradescope export
    # (with groups and its roster), 33 students each, as shapes.py builds them
    # from each LMS's own source (SOURCES.md).
    shapes = _shapes()
    for lms in ("moodle", "gradescope"):
        made = shapes.lms_class(lms, n=33)
        written.extend(path for key, path in sorted(made.write(folder).items()))
    return written


def _shapes():
    import importlib.util
    import sys

    name = "sample_term_shapes"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "shapes.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


if __name__ == "__main__":
    for path in build():
        print(f"wrote {path.relative_to(HERE.parent.parent)}")
