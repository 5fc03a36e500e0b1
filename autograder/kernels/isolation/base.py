"""The one interface of an isolation layer (autograder.kernels.isolation).

`Layer` is what the registry (autograder.kernels.isolation: choose_isolation,
use_isolation, detected_isolation) and the kernel manager
(autograder.kernels.jupyter.SandboxKernelManager) ask of a layer; each layer
is a subclass in a module of its own. `Isolation` is what a run records of
the layer it chose; `SandboxUnavailable` and `LayerUnavailable` say that
none, or one, cannot run here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from autograder.kernels.isolation.common import KernelUser, SandboxSpec


class SandboxUnavailable(ValueError, RuntimeError):
    """No isolation layer can run here and the instructor did not pass
    ``--unsandboxed``: the message says what is missing and how to fix it."""


class LayerUnavailable(RuntimeError):
    """A layer cannot be set up here (the user layer: its ACL entries, or
    its probe); the message says why and how to fix it."""


@dataclass(frozen=True)
class Isolation:
    """The isolation in force for this run's student kernels.

    ``layer``: "bubblewrap" (namespaces), "user" (a user of its own per
    kernel, where bubblewrap cannot start: containers) or "none" (only with
    the instructor's ``--unsandboxed``). ``summary``: one line for the
    terminal, report.html, class.json and Gradescope's output. ``details``:
    what holds and what does not, a line each.
    """

    layer: str
    summary: str
    details: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"layer": self.layer, "summary": self.summary, "details": list(self.details)}


class Layer(ABC):
    """One isolation layer of the student kernels.

    A grading run chooses one (choose_isolation: the first of LAYERS whose
    `problem` is "" and whose `prepare` succeeds), records its `name`, and
    each grading process sets it up again for its own kernel user
    (use_isolation: `prepare`). Each kernel the manager starts then gets
    the layer's `command_prefix` (or, where it `forks_kernels`, its
    `fork_prefix` around the fork server's placeholder), its `environment`,
    and its `after_kernel` once it ends.
    """

    #: The name a run records (run.json, class.json, report.html, each row's
    #: record) and SandboxKernelManager.isolation is given.
    name: ClassVar[str]
    #: The layer as the reasons for passing it over name it ("bubblewrap is
    #: not installed ...").
    title: ClassVar[str]
    #: What makes it run here, for the refusal to grade (SandboxUnavailable);
    #: "" for a layer that always runs.
    fix: ClassVar[str] = ""
    #: Whether only the instructor's ``--unsandboxed`` lets a run use it.
    needs_unsandboxed: ClassVar[bool] = False
    #: The notes each graded row gets for a kernel that ran under it (none
    #: for the strongest layer).
    notes: ClassVar[tuple[str, ...]] = ()
    #: Whether its kernels are forked from the fork server into the sandbox
    #: `fork_prefix` sets up (where the backend allows: SandboxKernelManager).
    forks_kernels: ClassVar[bool] = False
    #: Arguments after the kernel's command, whether started or forked.
    kernel_arguments: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        #: Why `prepare` failed in this grading process (use_isolation), ""
        #: where it did not: every kernel start then refuses (check_setup).
        self.setup_error = ""

    def __repr__(self) -> str:
        return f"<isolation layer {self.name}>"

    @abstractmethod
    def problem(self) -> str:
        """Why the layer cannot run here (what it needs), "" where it can."""

    # prepare, environment and after_kernel do nothing unless a layer needs
    # them (B027: empty on purpose, not abstract).

    def prepare(self, protected=()) -> None:  # noqa: B027
        """Set the layer up in this grading process for its kernels, with
        ``protected`` (the course, OUT, the submissions, the kit's sources,
        the instructor's files) out of their reach, and prove it. Once a
        process; asked again with more paths, it covers those too.

        Raises:
            LayerUnavailable: it cannot hold here (why, and the fix).
        """

    @abstractmethod
    def isolation(self, passed_over: list[str]) -> Isolation:
        """What holds under the layer, once prepared, for the run to print
        and keep; ``passed_over``: why each stronger layer could not run."""

    def check_setup(self) -> None:
        """Refuse a kernel start where `prepare` failed in this process."""
        if self.setup_error:
            raise RuntimeError(f"the {self.name} layer could not be set up in this grading "
                               f"process: {self.setup_error}")

    @abstractmethod
    def command_prefix(self, spec: SandboxSpec, user: KernelUser | None) -> list[str]:
        """What goes in front of a fresh kernel's command (after its cgroup
        and resource limits) to start it isolated, as ``user`` (None: the
        grader's own user, unprivileged) in the folders of ``spec``."""

    def fork_prefix(self, spec: SandboxSpec) -> list[str]:
        """Where `forks_kernels`: the command, ending in "--", that sets the
        sandbox of ``spec`` up around the fork server's placeholder
        (autograder.kernels.forkserver.server.PLACEHOLDER); the kernel is
        forked into it afterwards."""
        raise NotImplementedError(f"the {self.name} layer does not fork its kernels")

    def environment(self, spec: SandboxSpec, env: dict[str, str]) -> None:  # noqa: B027
        """Adjust a kernel's environment (common.kernel_environment's) for the layer."""

    def after_kernel(self, user: KernelUser | None) -> None:  # noqa: B027
        """End what a kernel of ``user`` left behind: after each kernel,
        and before each start (a kernel of a killed grading process)."""

    def clock_user(self, user: KernelUser | None) -> KernelUser | None:
        """The user whose every process the kernel's CPU clock counts (the
        user layer: the kernel's own, which runs nothing else); None: the
        kernel's cgroup or process tree only (autograder.cputime.Clock)."""
        return None
