"""The two exceptions a call into the student's kernel raises: the student's
failure (StudentCodeError), or the machine's (GraderFault)."""

from __future__ import annotations


class StudentCodeError(Exception):
    """The student's code raised, timed out or could not be reached."""


class GraderFault(Exception):
    """A test could not run for a reason that is not the student's code (the
    machine starved the student's kernel of CPU past the wall clock's
    backstop). Not a StudentCodeError, so that no test takes it for the
    student's failure; the grader also reads it from the kernel's profile
    (StudentKernel.faults) and grades the submission again."""
