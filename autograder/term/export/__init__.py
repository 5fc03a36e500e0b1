"""Grades and feedback of a graded lab in the files Canvas and Moodle import.

``export(out_dir, to)`` reads OUT/class.json (the final rows of the last
report and the term's facts, see autograder/term/model.py) and the feedback
pages it names, and writes into ``dest`` (default ``OUT/export/<to>/``) the
files of ``to`` ("canvas", "moodle" or "csv"), a ``README.txt`` with what to
read first and where each file goes, and returns the same as ``Exported``
(the CLI prints it).

What each file holds and why, from Canvas's and Moodle's importers (their
source, cited file by file: who takes the late penalty, Canvas's gradebook
import and re-upload, Moodle's grading worksheet, gradebook import and
feedback zip, the Maximum grade, the grades the LMS holds already, the plain
CSV): docs/lms-import.md.

The package, by concern:

- ``common``: what ``export`` takes and writes, ``Exported``, the helpers
  every format shares;
- ``late_policy``: who takes the late penalty (``late_instructions``);
- ``feedback``: the feedback comment (``feedback_text``, ``feedback_html``);
- ``canvas``: Canvas's grades.csv and feedback.zip (``canvas_assignment``);
- ``moodle_grades``: Moodle's participant ids, worksheet columns, Maximum grade;
- ``held``: the grades the LMS holds already, which an export replaces;
- ``moodle``: Moodle's grading worksheet, gradebook import and feedback.zip;
- ``moodle_record``: OUT/export/moodle/exported.json, a second upload;
- ``plain``: the plain CSV;
- ``entry``: ``export`` itself.
"""

from __future__ import annotations

from autograder.term.export.canvas import CANVAS_ASSIGNMENT as CANVAS_ASSIGNMENT
from autograder.term.export.canvas import CANVAS_COLUMNS as CANVAS_COLUMNS
from autograder.term.export.canvas import CANVAS_POINTS_CELL as CANVAS_POINTS_CELL
from autograder.term.export.canvas import canvas_assignment
from autograder.term.export.common import FEEDBACK_NAME as FEEDBACK_NAME
from autograder.term.export.common import MESSAGE_WIDTH as MESSAGE_WIDTH
from autograder.term.export.common import MOODLE_ACTIONS as MOODLE_ACTIONS
from autograder.term.export.common import NO_SUBMISSION as NO_SUBMISSION
from autograder.term.export.common import README as README
from autograder.term.export.common import (EXPORT_FORMATS, LATE_MODES, MOODLE_KEYS,
                                           MOODLE_ROUTES, UPLOAD_STEPS, Exported)
from autograder.term.export.common import _write_csv as _write_csv
from autograder.term.export.entry import export
from autograder.term.export.feedback import feedback_html, feedback_text
from autograder.term.export.late_policy import CANVAS_LATE_SETTING as CANVAS_LATE_SETTING
from autograder.term.export.late_policy import CANVAS_LATE_TAB as CANVAS_LATE_TAB
from autograder.term.export.late_policy import MOODLE_LATE_SETTING as MOODLE_LATE_SETTING
from autograder.term.export.late_policy import late_instructions
from autograder.term.export.moodle_grades import MOODLE_MAX_SETTING as MOODLE_MAX_SETTING
from autograder.term.export.moodle_grades import WORKSHEET_FEEDBACK as WORKSHEET_FEEDBACK
from autograder.term.export.moodle_grades import WORKSHEET_GRADE as WORKSHEET_GRADE
from autograder.term.export.moodle_grades import WORKSHEET_ID as WORKSHEET_ID
from autograder.term.export.moodle_grades import WORKSHEET_MODIFIED as WORKSHEET_MODIFIED
from autograder.term.export.moodle_grades import WORKSHEET_REQUIRED as WORKSHEET_REQUIRED
from autograder.term.export.moodle_grades import _scaled as _scaled
from autograder.term.export.moodle_record import EXPORT_RECORD as EXPORT_RECORD
from autograder.term.export.moodle_record import EXPORT_RECORD_SIZE as EXPORT_RECORD_SIZE
from autograder.term.export.plain import CSV_COLUMNS as CSV_COLUMNS

__all__ = ["Exported", "export", "feedback_text", "feedback_html", "canvas_assignment",
           "late_instructions", "EXPORT_FORMATS", "LATE_MODES", "MOODLE_KEYS", "MOODLE_ROUTES",
           "UPLOAD_STEPS"]
