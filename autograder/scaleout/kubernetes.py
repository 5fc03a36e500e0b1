"""A class graded on Kubernetes: an indexed Job of shards, a merge Job, the grader's image.

``python -m autograder kubernetes LAB --shards N --image IMAGE --out DIR``
writes, for courses that have a cluster:

- ``Dockerfile``: the grader's image (the kit, its pinned dependencies and
  bubblewrap on python:3.11-slim), built from the kit's folder;
- ``grade-job.yaml``: an Indexed Job of N completions; pod K-1 runs
  ``grade --shard K/N`` into ``/data/out/shards/K``. No service-account
  token is mounted, the pod runs with no privilege escalation and every
  capability dropped, and the NetworkPolicy in the same file gives the pods
  no network at all (ingress and egress denied; a cluster whose network
  plugin enforces NetworkPolicy is needed for that);
- ``merge-job.yaml``: run after the grade Job completes (``kubectl wait
  --for=condition=complete``): ``merge`` into ``/data/out/class``, then one
  ``grade`` of the whole class that regrades no one and applies the term's
  rules and the similarity check.

The pods' seccomp profile is Unconfined on purpose: bubblewrap, the student
kernel's sandbox, needs to create a user namespace, which the default
profile forbids; with it, a student's notebook sees neither the kit (the
hidden tests, references) nor the volume's other submissions, in a pod that
is already non-root, without capabilities and without network. Where the
nodes forbid unprivileged user namespaces, the kit grades without the
sandbox and says so in each row (docs/security.md).

The submissions and outputs are on a PersistentVolumeClaim (``--pvc``,
mounted at /data: SUBMISSIONS is a path inside it); the seed is a Secret
(``--seed-secret``, key ``seed``) mounted as a file and read with
``grade --seed-file``, so it is in no manifest and no command line. The
manifests are plain dicts, written as YAML; tests/test_kubernetes.py parses
them with the Kubernetes client's models (V1Job, V1NetworkPolicy). Nothing
here talks to a cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

#: Where the PersistentVolumeClaim and the seed Secret are mounted in the pods.
DATA = "/data"
SECRET = "/run/labkit"
KIT = "/opt/labkit"

DOCKERFILE = """\
# The grader's image (python -m autograder kubernetes): the kit with its pinned
# dependencies and bubblewrap. Build it from the kit's folder:
#   docker build -f {dockerfile} -t {image} .
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
RUN useradd --create-home --uid 10001 grader
USER 10001
"""


@dataclass
class Manifests:
    """The files `write` wrote."""

    dockerfile: Path
    grade_job: Path
    merge_job: Path
    documents: list[dict]


def _name(text: str) -> str:
    """A Kubernetes object name (RFC 1123 label) made from ``text``."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")
    return name or "labkit"


def manifests(lab_id: str, shards: int, image: str, submissions: str, *, pvc: str,
              seed_secret: str, namespace: str | None = None, cpu: str = "2",
              memory: str = "8Gi", name: str | None = None) -> list[dict]:
    """[grade Job, NetworkPolicy, merge Job] as Kubernetes objects (plain dicts).

    Raises:
        ValueError: shards below 1, or SUBMISSIONS not a path in the volume.
    """
    if not isinstance(shards, int) or shards < 1:
        raise ValueError(f"--shards {shards!r}: give the number of pods, 1 or more.")
    if not submissions.startswith(f"{DATA}/"):
        raise ValueError(f"SUBMISSIONS {submissions!r} must be a path in the volume mounted at "
                         f"{DATA} (e.g. {DATA}/{lab_id}/submissions.zip): the pods see only it.")
    base = _name(name or f"labkit-{lab_id}")
    metadata = {"labels": {"app.kubernetes.io/name": "labkit", "labkit/lab": lab_id,
                           "labkit/run": base}}
    if namespace:
        metadata["namespace"] = namespace
    out = f"{DATA}/out/{base}"

    def pod(command: str, role: str) -> dict:
        return {
            "metadata": {"labels": {**metadata["labels"], "labkit/role": role}},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                    "fsGroup": 10001,
                                    "seccompProfile": {"type": "Unconfined"}},
                "containers": [{
                    "name": "grader", "image": image, "workingDir": KIT,
                    "command": ["/bin/sh", "-c", command],
                    "resources": {"requests": {"cpu": cpu, "memory": memory},
                                  "limits": {"cpu": cpu, "memory": memory}},
                    "securityContext": {"allowPrivilegeEscalation": False,
                                        "capabilities": {"drop": ["ALL"]}},
                    "volumeMounts": [{"name": "data", "mountPath": DATA},
                                     {"name": "seed", "mountPath": SECRET, "readOnly": True}],
                }],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc}},
                            {"name": "seed", "secret": {"secretName": seed_secret,
                                                        "defaultMode": 0o400}}],
            },
        }

    grade = (f"K=$((JOB_COMPLETION_INDEX + 1)) && exec python -m autograder grade {lab_id} "
             f"{submissions} --out {out}/shards/$K --shard $K/{shards} "
             f"--seed-file {SECRET}/seed --jobs {cpu} --quiet --no-similarity")
    shard_dirs = " ".join(f"{out}/shards/{k}" for k in range(1, shards + 1))
    merge = (f"python -m autograder merge {lab_id} {shard_dirs} --out {out}/class && "
             f"exec python -m autograder grade {lab_id} {submissions} --out {out}/class "
             f"--quiet --jobs {cpu}")
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


def write(lab_id: str, out: Path, shards: int, image: str, submissions: str, **options
          ) -> Manifests:
    """Write the Dockerfile and the two manifests into ``out``."""
    from autograder.labs import get_lab

    lab = get_lab(lab_id)
    documents = manifests(lab.id, shards, image, submissions, **options)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dockerfile = out / "Dockerfile"
    dockerfile.write_text(DOCKERFILE.format(dockerfile=dockerfile, image=image, kit=KIT),
                          encoding="utf-8")
    grade_job, merge_job = out / "grade-job.yaml", out / "merge-job.yaml"
    grade_job.write_text(yaml.safe_dump_all(documents[:2], sort_keys=False), encoding="utf-8")
    merge_job.write_text(yaml.safe_dump(documents[2], sort_keys=False), encoding="utf-8")
    return Manifests(dockerfile, grade_job, merge_job, documents)
