"""No isolation: the student kernel runs as the grader's user, with its
resource limits only. Only with the instructor's ``--unsandboxed``, where
no other layer can run (autograder.kernels.isolation.choose_isolation).
"""

from __future__ import annotations

from autograder.kernels.isolation.base import Isolation, Layer
from autograder.kernels.isolation.common import KernelUser, SandboxSpec


class NoLayer(Layer):
    """Nothing between the kernel and the grader's files."""

    name = "none"
    title = "none"
    needs_unsandboxed = True
    notes = ("graded WITHOUT isolation (--unsandboxed): the notebook could read the hidden "
             "tests and other students' files",)

    def problem(self) -> str:
        return ""

    def isolation(self, passed_over: list[str]) -> Isolation:
        return Isolation(
            self.name, "NONE (--unsandboxed): student notebooks run as the grader's user and "
                       "can read the hidden tests, references, seed and other students' files",
            tuple(passed_over))

    def command_prefix(self, spec: SandboxSpec, user: KernelUser | None) -> list[str]:
        # Only with the instructor's --unsandboxed (choose_isolation).
        return []
