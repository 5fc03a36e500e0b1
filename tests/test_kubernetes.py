"""`python -m autograder kubernetes`: the manifests, parsed with the Kubernetes
client's own models (V1Job, V1NetworkPolicy), and the grader's Dockerfile.

A manifest round-trips through its model unchanged: a misspelt or misplaced
field would be dropped by the model (the client ignores what it does not
know) and the round trip would differ. Nothing is sent to a cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autograder.cli import main
from autograder.scaleout.kubernetes import manifests

client = pytest.importorskip("kubernetes.client", reason="the Kubernetes client (the dev extra)")

MODELS = {("batch/v1", "Job"): "V1Job", ("networking.k8s.io/v1", "NetworkPolicy"):
          "V1NetworkPolicy"}


def parsed(document: dict):
    """``document`` as the client's model, checked to round-trip unchanged."""
    api = client.ApiClient()
    model = api._ApiClient__deserialize(document, MODELS[document["apiVersion"],
                                                         document["kind"]])
    assert api.sanitize_for_serialization(model) == document
    return model


def test_the_manifests_are_valid_kubernetes_objects(tmp_path, capsys):
    assert main(["kubernetes", "lab1", "/data/lab1/submissions.zip", "--out", str(tmp_path),
                 "--shards", "8", "--image", "registry.example.edu/cs101/labkit:2026",
                 "--pvc", "cs101-grading", "--namespace", "cs101"]) == 0
    grade, policy = list(yaml.safe_load_all((tmp_path / "grade-job.yaml").read_text()))
    merge = yaml.safe_load((tmp_path / "merge-job.yaml").read_text())
    job, network, merging = parsed(grade), parsed(policy), parsed(merge)

    assert job.spec.completion_mode == "Indexed"
    assert job.spec.completions == job.spec.parallelism == 8
    pod = job.spec.template.spec
    assert pod.automount_service_account_token is False
    assert pod.security_context.run_as_non_root is True
    container = pod.containers[0]
    assert container.security_context.allow_privilege_escalation is False
    assert container.security_context.capabilities.drop == ["ALL"]
    command = container.command[-1]
    assert "--shard $K/8" in command and "K=$((JOB_COMPLETION_INDEX + 1))" in command
    assert "--seed-file /run/labkit/seed" in command and "--seed " not in command
    assert {v.name: v for v in pod.volumes}["seed"].secret.secret_name == "labkit-seed"
    assert {v.name: v for v in pod.volumes}["data"].persistent_volume_claim.claim_name == \
        "cs101-grading"
    # no network for the grading pods, in or out
    assert network.spec.policy_types == ["Ingress", "Egress"]
    assert network.spec.ingress == [] and network.spec.egress == []
    assert network.spec.pod_selector.match_labels == {"labkit/run": "labkit-lab1"}
    assert pod.containers and job.spec.template.metadata.labels["labkit/run"] == "labkit-lab1"
    assert job.metadata.namespace == merging.metadata.namespace == "cs101"
    merge_command = merging.spec.template.spec.containers[0].command[-1]
    shards = " ".join(f"/data/out/labkit-lab1/shards/{k}" for k in range(1, 9))
    assert f"merge lab1 {shards} --out /data/out/labkit-lab1/class" in merge_command
    dockerfile = (tmp_path / "Dockerfile").read_text()
    assert "FROM python:3.11" in dockerfile and "bubblewrap" in dockerfile
    assert "USER 10001" in dockerfile and "COPY solutions" in dockerfile
    printed = capsys.readouterr().out
    assert "kubectl wait --for=condition=complete" in printed


def test_a_submissions_path_outside_the_volume_is_refused():
    with pytest.raises(ValueError, match="must be a path in the volume mounted at /data"):
        manifests("lab1", 2, "img", "submissions.zip", pvc="p", seed_secret="s")
    with pytest.raises(ValueError, match="--shards 0"):
        manifests("lab1", 0, "img", "/data/x.zip", pvc="p", seed_secret="s")


def test_the_dockerfile_copies_what_the_kit_needs(tmp_path):
    from autograder.labs import KIT_ROOT

    main(["kubernetes", "lab2", "/data/s", "--out", str(tmp_path), "--shards", "1", "--image",
          "i", "--pvc", "p"])
    copied = [line.split()[1:-1] for line in (tmp_path / "Dockerfile").read_text().splitlines()
              if line.startswith("COPY ")]
    for names in copied:
        for name in names:
            assert (Path(KIT_ROOT) / name).exists(), name
