"""The student's kernel, started inside a sandbox: the isolation layers.

On Linux with bubblewrap (Debian/Ubuntu package `bubblewrap`), the kernel of
a submission sees a read-only system (/usr, /etc, the Python installation,
the kit's virtual environment and the student helpers) and nothing else of
this machine: not the course folder, the gradebook, solutions/, the
references, the submissions of other students or the output folder. It has
no network (`--unshare-net`), a private /tmp, a scratch working directory,
a minimal environment (no grader secrets such as a database URL), no
capabilities, and resource limits (address space, file size, processes)
set with setrlimit. Everything it can write is a tmpfs of a fixed size
(/tmp, /dev/shm, the scratch folder) but for its ipc folder.
It talks to the grader over ZeroMQ ipc sockets in a folder bound into the
sandbox, since loopback TCP is gone with the network.

It never runs as root: where the grader is root (a container, a CI runner)
the kernel runs as a user of its own (`common.kernel_user`), one uid for each
grading process, with no supplementary groups; where the grader is an
ordinary user, the kernel is that user.

Where bubblewrap is missing or cannot run (a container's default seccomp
profile) and the grader is root, each kernel runs as its own user with the
course denied to it by ACL entries instead (autograder.kernels.isolation.user),
proved by a probe first; with neither, grading refuses to start unless the
instructor passes --unsandboxed. The layer is chosen once
(choose_isolation), printed, and kept in run.json, class.json, report.html
and every row's notes that is not bubblewrap's.

One module for each layer, each a subclass of one interface (base.Layer:
what it needs, how it is set up, what it puts in front of a kernel's
command, its environment and its clean-up): `bubblewrap`, `user` (with
`acl` and `user_cleanup`, its helpers) and `none`; what they share is in
`common` (the kernel's limits, environment and user). Here: the layers,
strongest first (LAYERS), and the choice among them. A new layer (nsjail, a
container runtime) is a new module with its Layer, listed in LAYERS.
"""

from __future__ import annotations

from pathlib import Path

from autograder.kernels.forkserver import client as forkserver_client
from autograder.kernels.isolation.base import Isolation, Layer, LayerUnavailable, SandboxUnavailable
from autograder.kernels.isolation.bubblewrap import BubblewrapLayer
from autograder.kernels.isolation.common import SandboxSpec, kernel_environment
from autograder.kernels.isolation.none import NoLayer
from autograder.kernels.isolation.user import UserLayer

__all__ = ["LAYERS", "LAYER_NAMES", "Isolation", "Layer", "LayerUnavailable",
           "SandboxUnavailable", "choose_isolation", "detected_isolation", "layer_for",
           "layer_named", "notes_for", "prestart_fork_server", "use_isolation"]

#: The isolation layers, strongest first (Isolation.layer: their names).
LAYERS: tuple[Layer, ...] = (BubblewrapLayer(), UserLayer(), NoLayer())
LAYER_NAMES = tuple(layer.name for layer in LAYERS)


def layer_named(name: str) -> Layer:
    """The layer of that name (as a run records it).

    Raises:
        ValueError: no layer has it.
    """
    for layer in LAYERS:
        if layer.name == name:
            return layer
    raise ValueError(f"unknown isolation layer {name!r}; one of {', '.join(LAYER_NAMES)}")


def layer_for(name: str) -> Layer:
    """The layer ``name`` (the run's choice), or where it is empty the
    strongest here (detected_isolation)."""
    return layer_named(name) if name else detected_isolation()


def notes_for(name: str) -> list[str]:
    """The notes a graded row gets for a kernel that ran under the layer
    ``name`` (as its record says; none for bubblewrap or a name unknown)."""
    return next((list(layer.notes) for layer in LAYERS if layer.name == name), [])


def choose_isolation(protected=(), allow_unsandboxed: bool = False) -> Isolation:
    """The strongest isolation that works here, chosen once at start-up.

    bubblewrap where it starts; else, where the grader is root, a user of
    its own per kernel (autograder.kernels.isolation.user), set up for
    ``protected`` (the course, OUT, submissions, the kit's sources, the
    instructor's files) and proved by a probe run as that user; else none,
    but only with the instructor's explicit ``allow_unsandboxed``.

    Raises:
        SandboxUnavailable: neither layer works and ``allow_unsandboxed`` is
            false; the message says what is missing and the fixes.
    """
    reasons: list[str] = []
    for layer in LAYERS:
        if layer.needs_unsandboxed and not allow_unsandboxed:
            continue
        problem = layer.problem()
        if problem:
            reasons.append(f"{layer.title} {problem}")
            continue
        try:
            layer.prepare(protected)
        except LayerUnavailable as error:
            reasons.append(f"{layer.title} could not be set up: {error}")
            continue
        return layer.isolation(reasons)
    raise SandboxUnavailable(
        "No isolation for the student kernels on this machine: "
        + "; ".join(reasons) + ". Fix one of them: "
        + ", or ".join(layer.fix for layer in LAYERS if layer.fix)
        + ". Or pass --unsandboxed to grade anyway, knowing that a notebook "
        "can then read the hidden tests and other students' files.")


def use_isolation(layer: str, protected=()) -> None:
    """In a grading worker: set up the layer the run chose (for the user
    layer, this worker's own kernel user and its ACL entries). A failure is
    kept and reported by every kernel start (Layer.setup_error). Which layer
    a kernel gets is the kernel manager's setting (SandboxKernelManager.isolation)."""
    chosen = layer_named(layer)
    try:
        chosen.prepare(protected)
    except LayerUnavailable as error:
        chosen.setup_error = str(error)


def detected_isolation() -> Layer:
    """The strongest layer here, for kernels started outside a grading run
    (tests, tools): bubblewrap where it starts, else the user layer where
    the grader is root, else none."""
    return next(layer for layer in LAYERS if not layer.problem())


def prestart_fork_server(layer: Layer) -> None:
    """In a grading worker whose student kernels are forked (bubblewrap,
    a backend the fork server knows): start the fork server now, so that it
    imports TensorFlow while the worker sets itself up; the first kernel
    start waits for what is left. It is the server the kernels would start
    (the same key: the kernels' environment but for each sandbox's own
    folders); where it is not (settings changed since), it is replaced."""
    if not layer.forks_kernels:
        return
    env = kernel_environment(SandboxSpec(scratch=Path("/nonexistent"),
                                         ipc_dir=Path("/nonexistent")))
    preload = forkserver_client.preload_for(env.get("KERAS_BACKEND"))
    if preload is not None:
        forkserver_client.ForkServer.prestart(env, preload)
