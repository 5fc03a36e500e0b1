"""Plain records of what grading found; every report is written from these."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Status of a submission that was graded normally.
GRADED = "graded"
#: Status of an enrolled student who submitted nothing (autograder.term).
NO_SUBMISSION = "no submission"
#: The start of the status of a submission whose grading met a failure of
#: the grader or the machine twice (a test kernel lost, a kernel starved of
#: CPU, a kernel killed from outside): its scores are not the notebook's.
#: The terminal counts such rows, the run exits non-zero, and the same
#: command grades them again (autograder.grader.worker.Worker.grade_one).
NEEDS_REGRADING = "needs regrading"


def needs_regrading(status: str) -> bool:
    """Whether a row's ``status`` says it must be graded again."""
    return status.startswith(NEEDS_REGRADING)


@dataclass
class PropertyResult:
    """One graded property of an exercise: one tests cell and its verdict.

    Attributes:
        test: the tests cell's grade id, e.g. "test_DecoderLayer__padding".
        sentence: what the property is, as the student reads it beside the
            cell (the hidden test's docstring: autograder.hidden); "" when
            the cell carries none.
        score: points earned; max_score: the cell's points.
        message: why the points were lost ("" when passed): the kit's
            explanation first, then the error in one line
            (autograder.text.student_message). Never hidden test source.
        details: what the framework added to the error (its internals, long
            traces): shown folded on the feedback page, left out of the
            text exports ("" when none).
        same_as: the test of an earlier property of the exercise that met
            the same error ("" when none): the page says it once.
    """

    test: str
    sentence: str
    score: float
    max_score: float
    message: str = ""
    details: str = ""
    same_as: str = ""

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


@dataclass
class ExerciseResult:
    """One graded exercise of one submission.

    Attributes:
        exercise: the curriculum name, e.g. "dot_scores".
        score: points earned.
        max_score: points available.
        message: why points were lost ("" when full marks). Safe to show to
            the student: never contains hidden test source. One line per
            distinct error of its properties, an error that several tests
            met said once ("(the same error in 3 tests)").
        properties: the verdict of each graded property (tests cell), in
            the notebook's order ([] for results saved before they were kept,
            and for a notebook that was not graded); their scores add up to
            the tests' score.
    """

    exercise: str
    score: float
    max_score: float
    message: str = ""
    #: The tests' score when an instructor's override replaced it (None: no override).
    auto_score: float | None = None
    #: Who set the override, and their note to the student ("" when none).
    override_by: str = ""
    override_note: str = ""
    properties: list[PropertyResult] = field(default_factory=list)
    #: A picture of what differs: an SVG image as a data: URI (autograder.grader.pictures), "" when none.
    picture: str = ""

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


def exercise_from_json(saved: dict) -> ExerciseResult:
    """An ExerciseResult from its ``asdict`` form (OUT/results/, class.json's
    rows); one saved before properties were kept has none."""
    properties = [PropertyResult(**p) for p in saved.get("properties") or []]
    return ExerciseResult(**{**saved, "properties": properties})


@dataclass
class SubmissionResult:
    """One student's submission of one lab.

    Attributes:
        student_id: the id taken from the file name (autograder.grader.submissions.lms).
        lab: the lab id, e.g. "lab1".
        score: total points earned.
        max_score: total points available for the lab.
        status: "graded", or a short reason when something went wrong
            ("invalid notebook: ...", "kernel died: ...").
        source_name: the file name as submitted.
        exercises: one entry per graded exercise, in curriculum order.
        notes: extra remarks for the instructor (not shown to the student).
    """

    student_id: str
    lab: str
    score: float
    max_score: float
    status: str = GRADED
    source_name: str = ""
    exercises: list[ExerciseResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Set by the term's rules (autograder.term.apply), never by grading:
    #: the enrolled student's name (from the roster; "" without one).
    name: str = ""
    #: the score before the late penalty (None: no rule of the term applied).
    raw_score: float | None = None
    #: how late (seconds past the due date that applied), and the points taken.
    late_seconds: float = 0.0
    penalty: float = 0.0
    #: when it was submitted (ISO 8601, "" when not known) and the due date.
    submitted_at: str = ""
    due: str = ""
    #: the regrade requests of the row (autograder.term.regrades: Regrade.record()).
    regrades: list[dict] = field(default_factory=list)
