"""`python -m autograder kubernetes`: the manifests, parsed with the Kubernetes
client's own models (V1Job, V1NetworkPolicy) and checked against Pod Security
"baseline", the printed steps (run against a stand-in kubectl) and the
grader's Dockerfile.

A manifest round-trips through its model unchanged: a misspelt or misplaced
field would be dropped by the model (the client ignores what it does not
know) and the round trip would differ. Nothing is sent to a cluster.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from autograder.cli import main
from autograder.scaleout.kubernetes import (CAPABILITIES, image_reference, manifests,
                                            rwx_check, wait_command)

client = pytest.importorskip("kubernetes.client", reason="the Kubernetes client (the dev extra)")

MODELS = {("batch/v1", "Job"): "V1Job", ("networking.k8s.io/v1", "NetworkPolicy"):
          "V1NetworkPolicy"}
IMAGE = "registry.example.edu/cs101/labkit:2026"
DIGEST = "registry.example.edu/cs101/labkit@sha256:" + "0123456789abcdef" * 4
ARGS = ["--shards", "8", "--image", IMAGE, "--pvc", "cs101-grading", "--namespace", "cs101"]


def parsed(document: dict):
    """``document`` as the client's model, checked to round-trip unchanged."""
    api = client.ApiClient()
    model = api._ApiClient__deserialize(document, MODELS[document["apiVersion"],
                                                         document["kind"]])
    assert api.sanitize_for_serialization(model) == document
    return model


def written(out: Path) -> list[dict]:
    """[grade Job, NetworkPolicy, merge Job] as read back from ``out``."""
    grade, policy = list(yaml.safe_load_all((out / "grade-job.yaml").read_text()))
    return [grade, policy, yaml.safe_load((out / "merge-job.yaml").read_text())]


# --- Pod Security "baseline", from the standard's own text --------------------
# https://kubernetes.io/docs/concepts/security/pod-security-standards/ ("Baseline"):
# each control below is one row of that table, its restricted fields and its
# allowed values as written there (Kubernetes v1.31 and later).

#: Capabilities: "Adding additional capabilities beyond those listed below must
#: be disallowed."
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}
#: SELinux: "Setting the SELinux type is restricted".
BASELINE_SELINUX_TYPES = {None, "", "container_t", "container_init_t", "container_kvm_t",
                          "container_engine_t"}
#: Sysctls: "disallowed except for an allowed 'safe' subset".
BASELINE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                    "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                    "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}


def baseline_violations(template: dict) -> list[str]:
    """The Baseline controls a pod template ({"metadata", "spec"}) breaks, by name."""
    metadata, spec = template.get("metadata") or {}, template["spec"]
    pod_context = spec.get("securityContext") or {}
    containers = [c for kind in ("containers", "initContainers", "ephemeralContainers")
                  for c in spec.get(kind) or []]
    contexts = [c.get("securityContext") or {} for c in containers]
    both = [pod_context, *contexts]
    broken = []

    def control(name: str, ok: bool) -> None:
        if not ok and name not in broken:
            broken.append(name)

    # HostProcess: windowsOptions.hostProcess undefined/nil or false.
    control("HostProcess", all(not (c.get("windowsOptions") or {}).get("hostProcess")
                               for c in both))
    # Host Namespaces: spec.hostNetwork, hostPID, hostIPC undefined/nil or false.
    control("Host Namespaces", not any(spec.get(field) for field in
                                       ("hostNetwork", "hostPID", "hostIPC")))
    # Privileged Containers: securityContext.privileged undefined/nil or false.
    control("Privileged Containers", all(not c.get("privileged") for c in contexts))
    # Capabilities: capabilities.add only from the list.
    control("Capabilities", all(set((c.get("capabilities") or {}).get("add") or ())
                                <= BASELINE_CAPABILITIES for c in contexts))
    # HostPath Volumes: spec.volumes[*].hostPath undefined/nil.
    control("HostPath Volumes", all(v.get("hostPath") is None for v in spec.get("volumes") or []))
    # Host Ports: containers[*].ports[*].hostPort undefined/nil or 0.
    control("Host Ports", all(not p.get("hostPort") for c in containers
                              for p in c.get("ports") or []))
    # AppArmor: appArmorProfile.type undefined/nil, RuntimeDefault or Localhost; the
    # annotations container.apparmor.security.beta.kubernetes.io/* undefined/nil,
    # runtime/default or localhost/*.
    control("AppArmor", all((c.get("appArmorProfile") or {}).get("type") in
                            (None, "RuntimeDefault", "Localhost") for c in both)
            and all(value == "runtime/default" or value.startswith("localhost/")
                    for key, value in (metadata.get("annotations") or {}).items()
                    if key.startswith("container.apparmor.security.beta.kubernetes.io/")))
    # SELinux: seLinuxOptions.type from the list; .user and .role undefined.
    control("SELinux", all((c.get("seLinuxOptions") or {}).get("type") in BASELINE_SELINUX_TYPES
                           and (c.get("seLinuxOptions") or {}).get("user") is None
                           and (c.get("seLinuxOptions") or {}).get("role") is None
                           for c in both))
    # /proc Mount Type: procMount undefined/nil or Default.
    control("/proc Mount Type", all(c.get("procMount") in (None, "Default") for c in contexts))
    # Seccomp: seccompProfile.type undefined/nil, RuntimeDefault or Localhost
    # ("must not be explicitly set to Unconfined").
    control("Seccomp", all((c.get("seccompProfile") or {}).get("type") in
                           (None, "RuntimeDefault", "Localhost") for c in both))
    # Sysctls: spec.securityContext.sysctls[*].name from the safe subset.
    control("Sysctls", all(s.get("name") in BASELINE_SYSCTLS
                           for s in pod_context.get("sysctls") or []))
    return broken


def pod_templates(documents: list[dict]) -> list[dict]:
    return [d["spec"]["template"] for d in documents if d["kind"] == "Job"]


def run(command: str, tmp_path: Path, kubectl: str, *, timeout: float = 20
        ) -> subprocess.CompletedProcess:
    """``command`` run by /bin/sh with a stand-in ``kubectl`` (the shell script
    ``kubectl``, given "$@") and a ``sleep`` that returns at once on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("kubectl", kubectl), ("sleep", "exit 0")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "CALLS": str(tmp_path / "calls")}
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=tmp_path)


# --- the manifests -------------------------------------------------------------

def test_the_manifests_are_valid_kubernetes_objects(tmp_path, capsys):
    assert main(["kubernetes", "lab1", "/data/lab1/submissions.zip", "--out", str(tmp_path),
                 *ARGS]) == 0
    grade, policy, merge = written(tmp_path)
    job, network, merging = parsed(grade), parsed(policy), parsed(merge)

    assert job.spec.completion_mode == "Indexed"
    assert job.spec.completions == job.spec.parallelism == 8
    pod = job.spec.template.spec
    assert pod.automount_service_account_token is False
    # root, for the user-per-kernel layer, under the runtime's seccomp profile
    assert pod.security_context.run_as_non_root is False
    assert pod.security_context.run_as_user == 0
    assert pod.security_context.seccomp_profile.type == "RuntimeDefault"
    container = pod.containers[0]
    assert container.security_context.allow_privilege_escalation is False
    assert container.security_context.privileged is None
    assert container.security_context.capabilities.drop == ["ALL"]
    assert container.security_context.capabilities.add == [
        "CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "SETPCAP", "KILL"]
    assert not (pod.host_network or pod.host_pid or pod.host_ipc)
    assert all(v.host_path is None for v in pod.volumes)
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
    assert merging.spec.template.spec.security_context == pod.security_context
    merge_command = merging.spec.template.spec.containers[0].command[-1]
    shards = " ".join(f"/data/out/labkit-lab1/shards/{k}" for k in range(1, 9))
    assert f"merge lab1 {shards} --out /data/out/labkit-lab1/class" in merge_command
    dockerfile = (tmp_path / "Dockerfile").read_text()
    assert "FROM python:3.11" in dockerfile and "bubblewrap" in dockerfile
    assert "COPY solutions" in dockerfile
    # the grader stays root: no USER line but in a comment
    assert not [line for line in dockerfile.splitlines() if line.startswith("USER")]
    printed = capsys.readouterr().out
    assert 'pass "baseline"' in printed and "kubectl wait" not in printed


def test_the_default_manifests_pass_pod_security_baseline():
    documents = manifests("lab1", 4, IMAGE, "/data/s.zip", pvc="p", seed_secret="s")
    assert [baseline_violations(t) for t in pod_templates(documents)] == [[], []]
    assert set(CAPABILITIES) <= BASELINE_CAPABILITIES


def test_bubblewrap_pods_are_unconfined_and_non_root_and_fail_baseline_on_seccomp_only(
        tmp_path, capsys):
    assert main(["kubernetes", "lab1", "/data/lab1/submissions.zip", "--out", str(tmp_path),
                 *ARGS, "--bubblewrap"]) == 0
    documents = written(tmp_path)
    for template in pod_templates(documents):
        assert baseline_violations(template) == ["Seccomp"]
    pod = parsed(documents[0]).spec.template.spec
    assert pod.security_context.run_as_non_root is True
    assert pod.security_context.run_as_user == 10001
    assert pod.security_context.seccomp_profile.type == "Unconfined"
    assert pod.containers[0].security_context.capabilities.drop == ["ALL"]
    assert pod.containers[0].security_context.capabilities.add is None
    assert "\nUSER 10001\n" in (tmp_path / "Dockerfile").read_text()
    printed = capsys.readouterr().out
    assert 'do NOT pass "baseline" or "restricted"' in printed and "Unconfined" in printed
    assert "user namespace" in printed


#: One breach of each Baseline control, made to a pod template that passes.
def _set(path: str, value):
    def breach(template: dict) -> None:
        *parents, last = path.split(".")
        node = template
        for key in parents:
            node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
        node[int(last) if last.isdigit() else last] = value
    return breach


BREACHES = {
    "HostProcess": _set("spec.containers.0.securityContext.windowsOptions",
                        {"hostProcess": True}),
    "HostProcess (pod)": _set("spec.securityContext.windowsOptions", {"hostProcess": True}),
    "Host Namespaces": _set("spec.hostNetwork", True),
    "Host Namespaces (PID)": _set("spec.hostPID", True),
    "Host Namespaces (IPC)": _set("spec.hostIPC", True),
    "Privileged Containers": _set("spec.containers.0.securityContext.privileged", True),
    "Capabilities": _set("spec.containers.0.securityContext.capabilities.add",
                         ["CHOWN", "SYS_ADMIN"]),
    "HostPath Volumes": _set("spec.volumes.0", {"name": "data", "hostPath": {"path": "/"}}),
    "Host Ports": _set("spec.containers.0.ports", [{"containerPort": 80, "hostPort": 80}]),
    "AppArmor": _set("spec.containers.0.securityContext.appArmorProfile",
                     {"type": "Unconfined"}),
    "AppArmor (annotation)": _set(
        "metadata.annotations", {"container.apparmor.security.beta.kubernetes.io/grader":
                                 "unconfined"}),
    "SELinux": _set("spec.securityContext.seLinuxOptions", {"type": "spc_t"}),
    "SELinux (user)": _set("spec.containers.0.securityContext.seLinuxOptions",
                           {"user": "system_u"}),
    "/proc Mount Type": _set("spec.containers.0.securityContext.procMount", "Unmasked"),
    "Seccomp": _set("spec.containers.0.securityContext.seccompProfile", {"type": "Unconfined"}),
    "Sysctls": _set("spec.securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}]),
}


@pytest.mark.parametrize("breach", BREACHES)
def test_the_baseline_checker_catches_each_control(breach):
    template = pod_templates(manifests("lab1", 2, IMAGE, "/data/s.zip", pvc="p",
                                       seed_secret="s"))[0]
    broken = copy.deepcopy(template)
    BREACHES[breach](broken)
    assert broken != template
    assert baseline_violations(broken) == [breach.split(" (")[0]]


def test_what_baseline_allows_passes_the_checker():
    template = pod_templates(manifests("lab1", 2, IMAGE, "/data/s.zip", pvc="p",
                                       seed_secret="s"))[0]
    for allowed in (_set("spec.securityContext.seccompProfile", {"type": "Localhost",
                                                                 "localhostProfile": "x.json"}),
                    _set("spec.containers.0.securityContext.capabilities.add",
                         sorted(BASELINE_CAPABILITIES)),
                    _set("spec.hostNetwork", False),
                    _set("spec.containers.0.ports", [{"containerPort": 80, "hostPort": 0}]),
                    _set("spec.securityContext.sysctls", [{"name": "net.ipv4.tcp_syncookies",
                                                           "value": "1"}]),
                    _set("spec.securityContext.seLinuxOptions", {"type": "container_t"}),
                    _set("spec.containers.0.securityContext.procMount", "Default")):
        changed = copy.deepcopy(template)
        allowed(changed)
        assert baseline_violations(changed) == []


# --- the term's files ----------------------------------------------------------

def test_the_terms_files_go_to_every_shard_and_the_final_grade(tmp_path):
    assert main(["kubernetes", "lab1", "/data/lab1/canvas.zip", "--out", str(tmp_path), *ARGS,
                 "--roster", "/data/lab1/roster.csv", "--course", "/data/course.toml",
                 "--times", "/data/lab1/times.csv", "--extensions", "/data/lab1/ext.csv",
                 "--overrides", "/data/lab1/overrides.csv"]) == 0
    grade, _, merge = written(tmp_path)
    term = ("--roster /data/lab1/roster.csv --course /data/course.toml --times "
            "/data/lab1/times.csv --extensions /data/lab1/ext.csv --overrides "
            "/data/lab1/overrides.csv")
    shard = grade["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    final = merge["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert shard.endswith(term)
    merging, grading = final.split(" && exec ")
    assert "--roster" not in merging
    assert grading.startswith("python -m autograder grade lab1 /data/lab1/canvas.zip --out "
                              "/data/out/labkit-lab1/class") and grading.endswith(term)


@pytest.mark.parametrize("option", ["roster", "course", "times", "extensions", "overrides"])
def test_a_term_file_outside_the_volume_is_refused(option):
    for path in ("roster.csv", "/home/me/roster.csv", "/data", "/data/../etc/passwd",
                 "/database/x.csv"):
        with pytest.raises(ValueError, match=rf"--{option} .* must be a path in the volume "
                                             r"mounted at /data"):
            manifests("lab1", 2, IMAGE, "/data/s.zip", pvc="p", seed_secret="s",
                      term={option: path})


def test_a_submissions_path_outside_the_volume_is_refused():
    with pytest.raises(ValueError, match="must be a path in the volume mounted at /data"):
        manifests("lab1", 2, "img", "submissions.zip", pvc="p", seed_secret="s")
    with pytest.raises(ValueError, match="must be a path in the volume mounted at /data"):
        manifests("lab1", 2, "img", "/data/../root/s.zip", pvc="p", seed_secret="s")
    with pytest.raises(ValueError, match="--shards 0"):
        manifests("lab1", 0, "img", "/data/x.zip", pvc="p", seed_secret="s")
    with pytest.raises(ValueError, match="--namespace 'CS 101' is not a Kubernetes name"):
        manifests("lab1", 1, "img", "/data/x.zip", pvc="p", seed_secret="s",
                  namespace="CS 101")


# --- the image -----------------------------------------------------------------

@pytest.mark.parametrize("image, name, tag, digest", [
    ("i", "i", None, None),
    (IMAGE, "registry.example.edu/cs101/labkit", "2026", None),
    ("localhost:5000/labkit", "localhost:5000/labkit", None, None),
    (DIGEST, "registry.example.edu/cs101/labkit", None, DIGEST.split("@")[1]),
    (f"ghcr.io/cs-101/lab_kit:v1.2@{DIGEST.split('@')[1]}", "ghcr.io/cs-101/lab_kit", "v1.2",
     DIGEST.split("@")[1]),
])
def test_image_references_by_tag_and_digest(image, name, tag, digest):
    reference = image_reference(image)
    assert (reference.name, reference.tag, reference.digest) == (name, tag, digest)


@pytest.mark.parametrize("image", [
    "", "https://registry.example.edu/labkit", "registry.example.edu/CS101/labkit",
    "labkit:", "labkit:-x", "lab kit", "labkit@sha256:abc123", "labkit@sha256:" + "A" * 64,
    "labkit@md5:" + "0" * 32, "-labkit", "registry.example.edu/labkit//x", "labkit;rm -rf /",
])
def test_a_bad_image_reference_is_refused(image):
    with pytest.raises(ValueError, match="is not an image reference"):
        manifests("lab1", 1, image, "/data/x.zip", pvc="p", seed_secret="s")


def test_an_image_by_digest_is_used_as_given_and_a_tag_is_told_to_pin(tmp_path, capsys):
    main(["kubernetes", "lab1", "/data/s", "--out", str(tmp_path / "d"), "--shards", "2",
          "--image", DIGEST, "--pvc", "p"])
    pinned = capsys.readouterr().out
    assert {c["image"] for t in pod_templates(written(tmp_path / "d"))
            for c in t["spec"]["containers"]} == {DIGEST}
    # docker build cannot tag with a digest: it builds the name with a tag
    assert "-t registry.example.edu/cs101/labkit:<tag> ." in pinned
    assert "docker inspect" not in pinned
    assert "-t registry.example.edu/cs101/labkit:<tag> ." in \
        (tmp_path / "d" / "Dockerfile").read_text()

    main(["kubernetes", "lab1", "/data/s", "--out", str(tmp_path / "t"), "--shards", "2",
          "--image", IMAGE, "--pvc", "p"])
    tagged = capsys.readouterr().out
    assert {c["image"] for t in pod_templates(written(tmp_path / "t"))
            for c in t["spec"]["containers"]} == {IMAGE}
    assert f"-t {IMAGE} . && docker push {IMAGE}" in tagged
    assert "Pin it by digest" in tagged
    assert f"docker inspect --format='{{{{index .RepoDigests 0}}}}' {IMAGE}" in tagged


# --- the printed steps -----------------------------------------------------------

def test_every_printed_kubectl_command_carries_the_namespace(tmp_path, capsys):
    main(["kubernetes", "lab1", "/data/lab1/s.zip", "--out", str(tmp_path), *ARGS])
    printed = capsys.readouterr().out
    steps = re.findall(r"^\d+\. .*?(?=^\d+\. |\Z)", printed, re.M | re.S)
    assert len(steps) == 5
    calls = re.findall(r"kubectl (\w+)((?:(?!kubectl)[^;&|()])*)", printed)
    verbs = {verb for verb, _ in calls}
    assert {"get", "create", "apply", "describe", "logs"} <= verbs
    assert len(calls) == 11
    for verb, rest in calls:
        assert " -n cs101 " in f" {rest} ", (verb, rest)
    assert all("-n cs101" in step for step in steps[1:])
    # and none without --namespace (kubectl's current namespace then)
    main(["kubernetes", "lab1", "/data/lab1/s.zip", "--out", str(tmp_path), "--shards", "2",
          "--image", IMAGE, "--pvc", "p"])
    assert " -n " not in capsys.readouterr().out


def test_the_steps_check_that_the_volume_is_read_write_many(tmp_path, capsys):
    main(["kubernetes", "lab1", "/data/lab1/s.zip", "--out", str(tmp_path), *ARGS])
    printed = capsys.readouterr().out
    check = rwx_check("cs101-grading", "cs101", 8)
    assert "ReadWriteMany" in printed and f"     {check}\n" in printed
    asked = ("echo \"$@\" >> \"$CALLS\"; "
             "echo '[\"ReadWriteOnce\"]'")
    refused = run(check, tmp_path, asked)
    assert refused.returncode != 0
    assert "PVC cs101-grading is not ReadWriteMany" in refused.stderr
    assert (tmp_path / "calls").read_text().split() == [
        "get", "pvc", "cs101-grading", "-n", "cs101", "-o", "jsonpath={.spec.accessModes}"]
    shared = run(check, tmp_path, "echo '[\"ReadWriteMany\"]'")
    assert shared.returncode == 0 and shared.stderr == ""
    missing = run(check, tmp_path, "echo 'Error from server (NotFound)' >&2; exit 1")
    assert missing.returncode != 0 and "not ReadWriteMany (or not found)" in missing.stderr


def _job_states(*states: str) -> str:
    """A stand-in kubectl: `apply` succeeds; each `get` answers the next of ``states``
    (the last one again once they run out); every call is logged in $CALLS."""
    answers = " ".join(f"'{s}'" for s in states)
    return (f'echo "$@" >> "$CALLS"\n'
            f'[ "$1" = apply ] && exit 0\n'
            f'n=$(grep -c "^get" "$CALLS")\n'
            f'set -- {answers}\n'
            f'while [ "$n" -gt 1 ] && [ $# -gt 1 ]; do shift; n=$((n - 1)); done\n'
            f'printf %s "$1"')


def test_the_printed_wait_ends_when_the_job_fails(tmp_path, capsys):
    main(["kubernetes", "lab1", "/data/lab1/s.zip", "--out", str(tmp_path), *ARGS])
    printed = capsys.readouterr().out
    grade = next(line.strip() for line in printed.splitlines()
                 if line.strip().startswith("kubectl apply -n cs101 -f")
                 and "grade-job.yaml" in line)
    assert grade.endswith(f"&& {{ {wait_command(written(tmp_path)[0])}; }}")

    started = time.monotonic()
    failed = run(grade, tmp_path, _job_states("", "", "FailureTarget Failed"))
    assert failed.returncode == 1
    assert time.monotonic() - started < 10
    assert "job/labkit-lab1-grade did not complete (FailureTarget Failed)" in failed.stderr
    assert "kubectl describe job/labkit-lab1-grade -n cs101" in failed.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == f"apply -n cs101 -f {tmp_path / 'grade-job.yaml'}"
    assert calls[1:] == ["get job/labkit-lab1-grade -n cs101 -o jsonpath="
                         "{.status.conditions[?(@.status==\"True\")].type}"] * 3


def test_the_printed_wait_ends_when_the_job_completes(tmp_path):
    wait = wait_command(manifests("lab1", 2, IMAGE, "/data/s", pvc="p", seed_secret="s",
                                  namespace="cs101")[2])
    done = run(wait, tmp_path, _job_states("", "SuccessCriteriaMet Complete"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "job/labkit-lab1-merge complete.\n"
    assert len((tmp_path / "calls").read_text().splitlines()) == 2
    # kubectl cannot read the Job (gone, no cluster): it stops at once, failed
    (tmp_path / "calls").unlink()
    gone = run(wait, tmp_path, "echo 'Error from server (NotFound)' >&2; exit 1")
    assert gone.returncode == 1 and "did not complete (no state)" in gone.stderr
    # the shells instructors paste into run it alike
    for shell in ("bash", "zsh"):
        if (path := subprocess.run(["sh", "-c", f"command -v {shell}"], capture_output=True,
                                   text=True).stdout.strip()):
            (tmp_path / "calls").unlink(missing_ok=True)
            result = run(f"{path} -c {shlex.quote(wait)}", tmp_path,
                         _job_states("Failed"))
            assert result.returncode == 1, (shell, result.stderr)


def test_the_dockerfile_copies_what_the_kit_needs(tmp_path):
    from autograder.labs import KIT_ROOT

    main(["kubernetes", "lab2", "/data/s", "--out", str(tmp_path), "--shards", "1", "--image",
          "i", "--pvc", "p"])
    copied = [line.split()[1:-1] for line in (tmp_path / "Dockerfile").read_text().splitlines()
              if line.startswith("COPY ")]
    for names in copied:
        for name in names:
            assert (Path(KIT_ROOT) / name).exists(), name
