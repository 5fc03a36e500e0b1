"""Plain records of what grading found; every report is written from these."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Status of a submission that was graded normally.
GRADED = "graded"


@dataclass
class ExerciseResult:
    """One graded exercise of one submission.

    Attributes:
        exercise: the curriculum name, e.g. "dot_scores".
        score: points earned.
        max_score: points available.
        message: why points were lost ("" when full marks). Safe to show to
            the student: never contains hidden test source.
    """

    exercise: str
    score: float
    max_score: float
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


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
