"""A class graded on Kubernetes: an indexed Job of shards, a merge Job, the grader's image.

``python -m autograder kubernetes LAB SUBMISSIONS --shards N --image IMAGE
--pvc PVC --out DIR`` writes, for courses that have a cluster:

- ``Dockerfile``: the grader's image (the kit, its pinned dependencies and
  bubblewrap on python:3.11-slim), built from the kit's folder;
- ``grade-job.yaml``: an Indexed Job of N completions; pod K-1 runs
  ``grade --shard K/N`` into ``/data/out/<run>/shards/K``. No
  service-account token is mounted, and the NetworkPolicy in the same file
  gives the pods no network at all (ingress and egress denied; a cluster
  whose network plugin enforces NetworkPolicy is needed for that);
- ``merge-job.yaml``: ``merge`` into ``/data/out/<run>/class``, then one
  ``grade`` of the whole class that regrades no one and applies the term's
  rules and the similarity check.

Two ways to isolate a student's kernel, and what each asks of the cluster:

- By default, a user of its own for each kernel. The grader runs as root
  and switches each student kernel to an unprivileged uid (setresuid); the
  course's files are closed to that uid by their permissions. The pods run
  under the RuntimeDefault seccomp profile, without privilege escalation,
  with every capability dropped but the 7 that layer needs (CHOWN,
  DAC_OVERRIDE, FOWNER, SETUID, SETGID, SETPCAP, KILL, all 7 on Pod
  Security "baseline"'s list), so the manifests pass Pod Security
  "baseline". They fail "restricted", which forbids root and those
  capabilities. Bubblewrap cannot start under RuntimeDefault (it refuses
  new user namespaces), so the kit grades with the user layer and says so
  in its report. That layer closes OUT, the submissions and the term's
  files to each kernel's user with a POSIX ACL entry, so the volume's file
  system must keep POSIX ACLs; it gives the kernel no network namespace
  without CAP_SYS_ADMIN, and the NetworkPolicy stands in.
- ``--bubblewrap``: bubblewrap, the kit's full sandbox (the student's
  notebook sees neither the kit nor the volume). It must create a user
  namespace, so the pods' seccomp profile is Unconfined; they run as the
  non-root user 10001 with every capability dropped. Unconfined fails
  "baseline" and "restricted": only a namespace at "privileged" admits
  these pods, and the nodes must allow unprivileged user namespaces.

The submissions, the term's files (``--roster``, ``--course``, ``--times``,
``--extensions``, ``--overrides``) and the outputs are on a
PersistentVolumeClaim (``--pvc``) mounted at /data in every pod at once, so
it must be ReadWriteMany; each of those paths must be inside /data. The
term's files go to every shard and to the merge's final ``grade``, as
``slurm`` passes them: the roster decides who is graded, under which id.
The seed is a Secret (``--seed-secret``, key ``seed``) mounted as a file
and read with ``grade --seed-file``, so it is in no manifest and no command
line. ``--image`` is used exactly as given; a digest
(``registry/x@sha256:<64 hex>``) pins one build, and for a tag the printed
steps show how to find the pushed image's digest.

`Manifests.steps` are the commands the instructor runs, each kubectl with
``-n NAMESPACE`` where one was given: build and push, check that the volume
is ReadWriteMany, create the seed, apply the grade Job and wait, apply the
merge Job and wait. The wait is a shell loop over ``kubectl get job`` that
ends when the Job is Complete (status 0) or Failed (status 1, with a
message), where ``kubectl wait --for=condition=complete`` would wait out
its whole timeout on a failed Job. The manifests are plain dicts, written
as YAML; tests/scaleout/test_kubernetes.py parses them with the Kubernetes client's
models (V1Job, V1NetworkPolicy) and checks them against Pod Security
"baseline". Nothing here talks to a cluster.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autograder.grader.options import TERM_FLAGS

#: Where the PersistentVolumeClaim and the seed Secret are mounted in the pods.
DATA = "/data"
SECRET = "/run/labkit"
KIT = "/opt/labkit"
#: The capabilities a root grader keeps to give each student kernel a user of
#: its own: hand files over (CHOWN, FOWNER), reach the course's closed files
#: (DAC_OVERRIDE), change user (SETUID, SETGID), empty the kernel's bounding
#: set (SETPCAP) and stop its processes (KILL). Every one is on Pod Security
#: "baseline"'s list of capabilities a pod may add.
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "SETPCAP", "KILL")
#: The non-root user of the pods with --bubblewrap.
BUBBLEWRAP_UID = 10001
#: Seconds between two looks at a Job's state in the printed wait.
WAIT_POLL_S = 30

DOCKERFILE = """\
# The grader's image (python -m autograder kubernetes): the kit with its pinned
# dependencies and bubblewrap. Build it from the kit's folder:
#   docker build -f {dockerfile} -t {tag} .
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap git \\
    && rm -rf /var/lib/apt/lists/*
WORKDIR {kit}
COPY autograder ./autograder
COPY solutions ./solutions
COPY student ./student
COPY labs ./labs
COPY course.toml pyproject.toml README.md ./
RUN pip install --no-cache-dir -e ./student -e . \\
    && python -m autograder release --help > /dev/null
RUN useradd --create-home --uid {uid} grader
{user}"""
ROOT_USER = """\
# The grader stays root: it gives each student kernel a user of its own
# (setresuid), which a non-root grader cannot. `kubernetes --bubblewrap`
# writes USER {uid} here instead.
"""

# An image reference as the distribution project's grammar has it:
# [domain[:port]/]path[:tag][@sha256:<64 hex>]; path components lower case.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?", re.ASCII)
#: A Kubernetes object name (RFC 1123 subdomain) and a namespace (label).
_OBJECT = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?", re.ASCII)
_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)


@dataclass(frozen=True)
class Image:
    """An image reference, split: ``name[:tag][@digest]``."""

    reference: str
    name: str
    tag: str | None
    digest: str | None

    @property
    def build_tag(self) -> str:
        """What ``docker build -t`` takes: the reference without its digest."""
        if not self.digest:
            return self.reference
        return f"{self.name}:{self.tag or '<tag>'}"


def image_reference(image: str) -> Image:
    """``image`` split into name, tag and digest.

    Raises:
        ValueError: ``image`` is not an image reference.
    """
    found = IMAGE_REFERENCE.fullmatch(image or "")
    if not found or len(found["name"]) > 255:
        raise ValueError(
            f"--image {image!r} is not an image reference: give REGISTRY/PATH:TAG (e.g. "
            f"registry.example.edu/cs101/labkit:2026) or, pinned to one build, "
            f"REGISTRY/PATH@sha256:<64 hex digits> (lower-case path, no scheme).")
    return Image(image, found["name"], found["tag"], found["digest"])


@dataclass
class Step:
    """One step the instructor runs: what it does, its commands, a note after."""

    what: str
    commands: list[str]
    note: str = ""


@dataclass
class Manifests:
    """The files `write` wrote, and the steps that use them."""

    dockerfile: Path
    grade_job: Path
    merge_job: Path
    documents: list[dict]
    pod_security: str = ""
    steps: list[Step] = field(default_factory=list)

    def text(self) -> str:
        """What the command prints: the files, the Pod Security level, the steps."""
        lines = [f"Wrote {self.dockerfile}, {self.grade_job} and {self.merge_job}.",
                 self.pod_security]
        for number, step in enumerate(self.steps, 1):
            lines.append(f"{number}. {step.what}")
            lines += [f"     {command}" for command in step.commands]
            if step.note:
                lines.append(f"   {step.note}")
        return "\n".join(lines)


def _name(text: str) -> str:
    """A Kubernetes object name (RFC 1123 label) made from ``text``."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")
    return name or "labkit"


def _in_volume(path: str, what: str, example: str) -> str:
    """``path`` normalized, checked to lie inside the volume (DATA).

    Raises:
        ValueError: ``path`` is not under DATA.
    """
    normal = posixpath.normpath(path) if isinstance(path, str) and path else ""
    if not (normal.startswith(f"{DATA}/") and path.startswith(f"{DATA}/")):
        raise ValueError(f"{what} {path!r} must be a path in the volume mounted at {DATA} "
                         f"(e.g. {example}): the pods see only it.")
    return normal


def _checked_name(value: str, what: str, pattern: re.Pattern) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"{what} {value!r} is not a Kubernetes name: lower-case letters, "
                         f"digits and '-', starting and ending with a letter or digit.")
    return value


def _ns(namespace: str | None) -> str:
    """The ``-n NAMESPACE`` of a kubectl command, or nothing."""
    return f" -n {namespace}" if namespace else ""


def manifests(lab_id: str, shards: int, image: str, submissions: str, *, pvc: str,
              seed_secret: str, namespace: str | None = None, cpu: str = "2",
              memory: str = "8Gi", name: str | None = None, bubblewrap: bool = False,
              term: dict[str, str | None] | None = None) -> list[dict]:
    """[grade Job, NetworkPolicy, merge Job] as Kubernetes objects (plain dicts).

    ``bubblewrap``: the pods run bubblewrap (seccomp Unconfined, non-root);
    without it, root with CAPABILITIES under RuntimeDefault (Pod Security
    "baseline"). ``term``: grade's term files by option name (TERM_FLAGS),
    each a path in the volume, passed to every shard and the final grade.

    Raises:
        ValueError: shards below 1, SUBMISSIONS or a term file not a path in
            the volume, an image that is not an image reference, or a PVC,
            Secret or namespace that is not a Kubernetes name.
    """
    if not isinstance(shards, int) or shards < 1:
        raise ValueError(f"--shards {shards!r}: give the number of pods, 1 or more.")
    submissions = _in_volume(submissions, "SUBMISSIONS", f"{DATA}/{lab_id}/submissions.zip")
    image_reference(image)
    _checked_name(pvc, "--pvc", _OBJECT)
    _checked_name(seed_secret, "--seed-secret", _OBJECT)
    if namespace:
        _checked_name(namespace, "--namespace", _LABEL)
    term_args = []
    for option, path in (term or {}).items():
        if option not in TERM_FLAGS:
            raise ValueError(f"{option} is not one of grade's term options ({TERM_FLAGS})")
        if path:
            term_args += [f"--{option}",
                          _in_volume(path, f"--{option}", f"{DATA}/{lab_id}/{option}.csv")]
    term_line = "".join(f" {shlex.quote(arg)}" for arg in term_args)

    base = _name(name or f"labkit-{lab_id}")
    metadata: dict = {"labels": {"app.kubernetes.io/name": "labkit", "labkit/lab": lab_id,
                                 "labkit/run": base}}
    if namespace:
        metadata["namespace"] = namespace
    out = f"{DATA}/out/{base}"
    if bubblewrap:
        pod_context = {"runAsNonRoot": True, "runAsUser": BUBBLEWRAP_UID,
                       "fsGroup": BUBBLEWRAP_UID, "seccompProfile": {"type": "Unconfined"}}
        capabilities = {"drop": ["ALL"]}
    else:
        pod_context = {"runAsNonRoot": False, "runAsUser": 0, "runAsGroup": 0,
                       "seccompProfile": {"type": "RuntimeDefault"}}
        capabilities = {"drop": ["ALL"], "add": list(CAPABILITIES)}

    def pod(command: str, role: str) -> dict:
        return {
            "metadata": {"labels": {**metadata["labels"], "labkit/role": role}},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "securityContext": dict(pod_context),
                "containers": [{
                    "name": "grader", "image": image, "workingDir": KIT,
                    "command": ["/bin/sh", "-c", command],
                    "resources": {"requests": {"cpu": cpu, "memory": memory},
                                  "limits": {"cpu": cpu, "memory": memory}},
                    "securityContext": {"allowPrivilegeEscalation": False,
                                        "capabilities": {k: list(v) for k, v in
                                                         capabilities.items()}},
                    "volumeMounts": [{"name": "data", "mountPath": DATA},
                                     {"name": "seed", "mountPath": SECRET, "readOnly": True}],
                }],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc}},
                            {"name": "seed", "secret": {"secretName": seed_secret,
                                                        "defaultMode": 0o400}}],
            },
        }

    quoted = shlex.quote(submissions)
    grade = (f"K=$((JOB_COMPLETION_INDEX + 1)) && exec python -m autograder grade {lab_id} "
             f"{quoted} --out {out}/shards/$K --shard $K/{shards} "
             f"--seed-file {SECRET}/seed --jobs {cpu} --quiet --no-similarity{term_line}")
    shard_dirs = " ".join(f"{out}/shards/{k}" for k in range(1, shards + 1))
    # The term's rules and the similarity check over the whole class: no one
    # is graded again (their results are there, and the files unchanged).
    merge = (f"python -m autograder merge {lab_id} {shard_dirs} --out {out}/class && "
             f"exec python -m autograder grade {lab_id} {quoted} --out {out}/class "
             f"--quiet --jobs {cpu}{term_line}")
    grade_job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {**metadata, "name": f"{base}-grade"},
        "spec": {"completionMode": "Indexed", "completions": shards, "parallelism": shards,
                 "backoffLimitPerIndex": 1, "ttlSecondsAfterFinished": 86400,
                 "template": pod(grade, "grade")},
    }
    policy = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {**metadata, "name": f"{base}-no-network"},
        "spec": {"podSelector": {"matchLabels": {"labkit/run": base}},
                 "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []},
    }
    merge_job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {**metadata, "name": f"{base}-merge"},
        "spec": {"completions": 1, "backoffLimit": 0, "ttlSecondsAfterFinished": 86400,
                 "template": pod(merge, "merge")},
    }
    return [grade_job, policy, merge_job]


def wait_command(job: dict, poll_s: int = WAIT_POLL_S) -> str:
    """One shell command that waits for ``job`` (a Job manifest) to finish:
    status 0 once it is Complete, 1 with a message once it has Failed (or
    kubectl cannot read it). It reads the conditions whose status is True
    every ``poll_s`` seconds; POSIX sh, bash and zsh run it alike."""
    name = job["metadata"]["name"]
    ns = _ns(job["metadata"].get("namespace"))
    labels = job["spec"]["template"]["metadata"]["labels"]
    pods = f"labkit/run={labels['labkit/run']},labkit/role={labels['labkit/role']}"
    return (f"while state=$(kubectl get job/{name}{ns} -o jsonpath="
            "'{.status.conditions[?(@.status==\"True\")].type}'); do "
            'case "$state" in *Complete*|*Failed*) break;; esac; '
            f"sleep {poll_s}; done; "
            f'case "$state" in *Complete*) echo "job/{name} complete.";; '
            f'*) echo "job/{name} did not complete (${{state:-no state}}): see kubectl '
            f"describe job/{name}{ns} and kubectl logs{ns} -l {pods} --prefix"
            '" >&2; false;; esac')


def rwx_check(pvc: str, namespace: str | None, shards: int) -> str:
    """One shell command: status 0 where ``pvc`` is ReadWriteMany, else 1
    and a message saying why it must be."""
    return (f"kubectl get pvc {pvc}{_ns(namespace)} -o jsonpath='{{.spec.accessModes}}' "
            f"| grep -q ReadWriteMany || {{ echo \"PVC {pvc} is not ReadWriteMany (or "
            f"not found): the {shards} grading pods mount it at once, on any node; give a "
            f"claim whose storage class offers ReadWriteMany.\" "
            f">&2; false; }}")


def pod_security(bubblewrap: bool) -> str:
    """What the manifests' pods pass of the Pod Security Standards, and why."""
    if bubblewrap:
        return ("Pod Security: with --bubblewrap these pods do NOT pass \"baseline\" or "
                "\"restricted\": their seccomp profile is Unconfined, which both forbid, "
                "because bubblewrap must create a user namespace and RuntimeDefault refuses "
                "it. Only a namespace at \"privileged\" admits them, and the nodes must allow "
                "unprivileged user namespaces. Leave out --bubblewrap for pods that pass "
                "\"baseline\".")
    return ("Pod Security: these pods pass \"baseline\" (seccomp RuntimeDefault, no "
            f"privilege escalation, every capability dropped but {len(CAPABILITIES)} that "
            "baseline allows), not \"restricted\", which forbids root and those "
            "capabilities: the grader runs as root to give each student kernel a user of "
            "its own. --bubblewrap runs the full "
            "sandbox instead, in pods that need a \"privileged\" namespace.")


def steps(documents: list[dict], image: str, dockerfile: Path, grade_job: Path,
          merge_job: Path, *, pvc: str, seed_secret: str, bubblewrap: bool = False
          ) -> list[Step]:
    """The commands that build the image and run the Jobs, in order."""
    grade, _, merge = documents
    ns = _ns(grade["metadata"].get("namespace"))
    shards = grade["spec"]["completions"]
    reference = image_reference(image)
    tag = reference.build_tag
    build = f"docker build -f {dockerfile} -t {tag} . && docker push {tag}"
    if reference.digest:
        first = Step("Build and push the image (from the kit's folder) under a tag; the "
                     "manifests name it by its digest, so the pods run that one build:",
                     [build],
                     f"{image} must be the digest the push reports.")
    else:
        first = Step("Build and push the image (from the kit's folder):", [build],
                     f"Pin it by digest (recommended: a tag can move, a digest names one "
                     f"build): docker inspect --format='{{{{index .RepoDigests 0}}}}' "
                     f"{image} prints {reference.name}@sha256:<64 hex> after the push; "
                     f"run this command again with --image set to it.")
    run = grade["metadata"]["labels"]["labkit/run"]
    return [
        first,
        Step(f"Check that the volume is ReadWriteMany: all {shards} grading pods mount it "
             f"at once, on any node. SUBMISSIONS and the term's files must be on it:",
             [rwx_check(pvc, grade["metadata"].get("namespace"), shards)],
             "" if bubblewrap else
             "Its file system must keep POSIX ACLs too: the user layer closes OUT, the "
             "submissions and the term's files to each kernel's user with an ACL entry, and "
             "grade refuses to grade without isolation."),
        Step("The seed, once:",
             [f"kubectl create secret generic {seed_secret}{ns} --from-literal=seed="
              f"$(python3 -c 'import secrets; print(secrets.token_hex(16))')"]),
        Step("Grade, and wait until the Job completes (status 0) or fails (status 1):",
             [f"kubectl apply{ns} -f {grade_job} && {{ {wait_command(grade)}; }}"]),
        Step("Once it has completed, merge, and wait likewise:",
             [f"kubectl apply{ns} -f {merge_job} && {{ {wait_command(merge)}; }}"],
             f"The class: out/{run}/class on the volume (grades.csv, report.html); the "
             f"merge's log: kubectl logs{ns} job/{merge['metadata']['name']}"),
    ]


def write(lab_id: str, out: Path, shards: int, image: str, submissions: str, **options
          ) -> Manifests:
    """Write the Dockerfile and the two manifests into ``out``; the steps that use them."""
    from autograder.labs import get_lab

    lab = get_lab(lab_id)
    documents = manifests(lab.id, shards, image, submissions, **options)
    bubblewrap = bool(options.get("bubblewrap"))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dockerfile = out / "Dockerfile"
    user = (f"USER {BUBBLEWRAP_UID}\n" if bubblewrap
            else ROOT_USER.format(uid=BUBBLEWRAP_UID))
    dockerfile.write_text(DOCKERFILE.format(dockerfile=dockerfile,
                                            tag=image_reference(image).build_tag, kit=KIT,
                                            uid=BUBBLEWRAP_UID, user=user), encoding="utf-8")
    grade_job, merge_job = out / "grade-job.yaml", out / "merge-job.yaml"
    grade_job.write_text(yaml.safe_dump_all(documents[:2], sort_keys=False), encoding="utf-8")
    merge_job.write_text(yaml.safe_dump(documents[2], sort_keys=False), encoding="utf-8")
    return Manifests(dockerfile, grade_job, merge_job, documents, pod_security(bubblewrap),
                     steps(documents, image, dockerfile, grade_job, merge_job,
                           pvc=options["pvc"], seed_secret=options["seed_secret"],
                           bubblewrap=bubblewrap))
