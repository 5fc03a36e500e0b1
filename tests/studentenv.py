"""Environments a student's kernel runs in, and running a lab notebook in one.

The kit's own tests run student notebooks with the kit's interpreter, where
`labkit` is an editable install and every package has the kit's pins. A
student runs them elsewhere: in Colab (its own Python, Keras, TensorFlow and
NumPy, no labkit until the first cell installs it, ``google.colab`` imported
at kernel start) or in a local environment with whatever `pip install
./student` allowed. This module builds such environments so that tests can
run the labs the way students do:

- `overlay_env`: in seconds, a new venv that sees the kit's installed packages
  (Keras, TensorFlow, NumPy, Matplotlib, ipykernel) but not labkit, nor the
  kit itself; pip there installs into the venv only (tests/student/test_studentenv.py
  checks that the kit's .venv is left untouched);
- `built_env`: a real venv built from the package registry with another
  Python and other versions (Colab's, the oldest Keras), cached under
  .cache/studentenvs/<name> and rebuilt only when its requirements change;
- `run_notebook`: executes a notebook with nbclient in a kernel started with
  the environment's interpreter, nothing of the kit's environment leaking in
  (no PYTHONPATH, no VIRTUAL_ENV).

With ``colab=True`` an environment also behaves like Colab at kernel start:
a stub package ``google.colab`` that a ``.pth`` line imports, so the labs'
first cell ("Colab only: installs this lab's helpers") runs its Colab branch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat import NotebookNode

KIT_ROOT = Path(__file__).resolve().parent.parent


def _kit_venv() -> Path:
    """The kit's own environment (`make env`), whose packages an overlay sees:
    $LABKIT_VENV, else the venv running this code, else the checkout's .venv."""
    if os.environ.get("LABKIT_VENV"):
        return Path(os.environ["LABKIT_VENV"])
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix)
    return KIT_ROOT / ".venv"


KIT_VENV = _kit_venv()

#: Entries of the kit's site-packages that an overlay leaves out: labkit (the
#: student installs it), the kit's own distribution, every .pth file and
#: editable-install finder (they would put the kit's checkout on sys.path),
#: pip/setuptools/wheel (the overlay has its own; two copies confuse pip),
#: and byte-code caches.
_LEFT_OUT_PREFIXES = ("labkit", "transformer_lab_kit", "autograder", "__editable__",
                      "pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel",
                      "__pycache__")

#: Printed by `report_versions` inside an environment: what it really has.
_VERSIONS_SCRIPT = r"""
import json, platform
from importlib import metadata
found = {"python": platform.python_version()}
for name in ("keras", "tensorflow", "tensorflow-cpu", "numpy", "matplotlib", "ipykernel",
             "labkit", "torch", "jax"):
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
if "tensorflow" not in found and "tensorflow-cpu" in found:
    found["tensorflow"] = found.pop("tensorflow-cpu")
print(json.dumps(found))
"""

#: The stub of Colab's module: the labs only test that it is imported.
_COLAB_STUB = '"""Stand-in for Colab\'s google.colab (tests/studentenv.py): present at kernel start."""\n'
_COLAB_PTH = "studentenv_zz_colab.pth"  # sorted after the overlay's own .pth: runs last
_OVERLAY_PTH = "studentenv_kit.pth"
_OVERLAY_DIR = "kit-site-packages"
_STAMP = ".studentenv.json"


@dataclass(frozen=True)
class StudentEnv:
    """A student's environment: its interpreter and what it has installed."""

    name: str
    python: Path
    #: {"python", "keras", "tensorflow", "numpy", ...} as the environment reports them.
    versions: dict[str, str] = field(hash=False, compare=False)

    def describe(self) -> str:
        """One line: the versions that matter to the labs."""
        keys = ("python", "tensorflow", "keras", "numpy", "matplotlib")
        return ", ".join(f"{key} {self.versions[key]}" for key in keys if key in self.versions)


class StudentEnvError(RuntimeError):
    """An environment could not be made or used; the message says why and what to do."""


def _run(args: list, what: str, timeout: int = 1800, env: dict | None = None) -> str:
    """Run ``args``; on failure raise saying ``what`` failed and the tail of its output."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=timeout, env=env or clean_environ())
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip()[-3000:]
        raise StudentEnvError(f"{what} failed (exit {result.returncode}):\n{tail}")
    return result.stdout


def clean_environ(extra: dict | None = None) -> dict[str, str]:
    """os.environ without what would make the kit's packages leak into another
    interpreter (PYTHONPATH, PYTHONHOME, VIRTUAL_ENV, PYTHONSTARTUP), plus ``extra``."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP",
                          "PYTHONNOUSERSITE", "__PYVENV_LAUNCHER__")}
    env["PYTHONNOUSERSITE"] = "1"
    env.update(extra or {})
    return env


def report_versions(python: Path) -> dict[str, str]:
    """The versions ``python``'s environment reports (python, keras, tensorflow, ...)."""
    return json.loads(_run([python, "-c", _VERSIONS_SCRIPT], f"asking {python} its versions",
                           timeout=120).strip().splitlines()[-1])


def _site_packages(venv: Path) -> Path:
    """The one lib/pythonX.Y/site-packages of ``venv``."""
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if len(found) != 1:
        raise StudentEnvError(f"expected one lib/python3.*/site-packages in {venv}, found "
                              f"{[str(p) for p in found] or 'none'}; is it a venv? "
                              f"Rebuild it (make env for the kit's).")
    return found[0]


def _base_python(venv: Path) -> Path:
    """The interpreter ``venv`` was made from (its pyvenv.cfg's ``home``)."""
    config = venv / "pyvenv.cfg"
    if not config.exists():
        raise StudentEnvError(f"{config} not found: {venv} is not a venv. Build the kit's "
                              f"environment first (make env), or set LABKIT_VENV.")
    values = dict(line.split("=", 1) for line in config.read_text().splitlines() if "=" in line)
    values = {key.strip(): value.strip() for key, value in values.items()}
    version = values.get("version", values.get("version_info", ""))
    major_minor = ".".join(version.split(".")[:2])
    for candidate in (f"python{major_minor}", "python3"):
        path = Path(values.get("home", "")) / candidate
        if path.exists():
            return path
    raise StudentEnvError(f"{config} names home {values.get('home')!r}, where no python3 "
                          f"is: rebuild the kit's environment (make env).")


def _left_out(name: str) -> bool:
    """Whether an overlay leaves the kit's site-packages entry ``name`` out."""
    lowered = name.lower()
    return lowered.endswith(".pth") or lowered.startswith(_LEFT_OUT_PREFIXES)


def _add_colab(site_packages: Path) -> None:
    """Make ``google.colab`` importable and imported at start, like in Colab.

    ``google`` is a namespace package (protobuf's google.protobuf lives in
    another site-packages entry): the stub adds google/colab/ with no
    google/__init__.py, so both halves of the namespace stay importable."""
    package = site_packages / "google" / "colab"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(_COLAB_STUB)
    if (site_packages / "google" / "__init__.py").exists():
        raise StudentEnvError(f"{site_packages}/google/__init__.py exists: it would hide "
                              f"google.protobuf; remove it.")
    (site_packages / _COLAB_PTH).write_text("import google.colab\n")


def _new_venv(base: Path, dest: Path) -> Path:
    """A fresh venv with pip at ``dest`` made by ``base``; returns its site-packages."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _run([base, "-m", "venv", dest], f"python -m venv {dest} (with {base})", timeout=600)
    return _site_packages(dest)


def overlay_env(dest: Path, colab: bool = True) -> StudentEnv:
    """A new venv at ``dest`` that sees the kit's installed packages except labkit.

    Its site-packages has a folder of symbolic links to the kit's site-packages
    entries (less labkit, the kit itself, .pth files, editable finders, pip and
    setuptools), put on sys.path by a .pth line; the venv's own pip installs
    into the venv, and never sees nor touches the kit's editable labkit.
    ``dest`` is replaced if it exists."""
    started = time.monotonic()
    dest = Path(dest).resolve()
    kit_site = _site_packages(KIT_VENV)
    site_packages = _new_venv(_base_python(KIT_VENV), dest)
    links = dest / _OVERLAY_DIR
    links.mkdir()
    for entry in sorted(kit_site.iterdir()):
        if not _left_out(entry.name):
            (links / entry.name).symlink_to(entry)
    (site_packages / _OVERLAY_PTH).write_text(f"{links}\n")
    if colab:
        _add_colab(site_packages)
    python = dest / "bin" / "python"
    env = StudentEnv(f"overlay {dest.name}", python, report_versions(python))
    print(f"studentenv: overlay {dest} made in {time.monotonic() - started:.1f} s ({env.describe()})")
    return env


def find_python(python: str) -> Path:
    """An interpreter for ``python``: a path, or a version such as "3.13" or
    "3.13.0" found among pyenv's versions, or a name on PATH ("python3.13")."""
    if os.sep in python:
        path = Path(python)
        if path.exists():
            return path
        raise StudentEnvError(f"no interpreter at {python}; give a path that exists or a "
                              f"version such as '3.13'.")
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    major_minor = ".".join(python.split(".")[:2])

    def version_key(path: Path) -> tuple:
        return tuple(int(part) if part.isdigit() else -1 for part in path.name.split("."))

    candidates = sorted((v for v in pyenv_root.glob(f"{python}*")
                         if v.name == python or v.name.startswith(f"{python}.")),
                        key=version_key)
    for version in reversed(candidates):
        path = version / "bin" / f"python{major_minor}"
        if path.exists():
            return path
    on_path = shutil.which(python if python.startswith("python") else f"python{python}")
    if on_path:
        return Path(on_path)
    raise StudentEnvError(f"no Python {python} found (looked in {pyenv_root} and on PATH); "
                          f"install it (pyenv install {python}) or give the interpreter's path.")


def built_env(name: str, python: str, requirements: list[str], colab: bool = True,
              cache: Path = KIT_ROOT / ".cache" / "studentenvs") -> StudentEnv:
    """A venv at ``cache/name`` with ``python`` and ``requirements`` (plus ipykernel)
    installed from the package registry; reused while its key (the interpreter's
    version, the requirements, colab) is unchanged, built afresh otherwise."""
    if not requirements or any(not r.strip() or r.strip().startswith("-") for r in requirements):
        raise StudentEnvError(f"requirements must be pip requirement strings such as "
                              f"'keras==3.13.2', got {requirements!r}.")
    interpreter = find_python(python)
    base_version = _run([interpreter, "-c", "import platform; print(platform.python_version())"],
                        f"running {interpreter}", timeout=60).strip()
    key = {"python": base_version, "requirements": list(requirements), "colab": colab,
           "format": 1}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    dest = Path(cache) / name
    stamp = dest / _STAMP
    venv_python = dest / "bin" / "python"
    if stamp.exists() and venv_python.exists():
        recorded = json.loads(stamp.read_text())
        if recorded.get("digest") == digest:
            print(f"studentenv: {name} reused from {dest} (built in "
                  f"{recorded.get('build_seconds', 0):.0f} s)")
            return StudentEnv(name, venv_python, recorded["versions"])
    started = time.monotonic()
    site_packages = _new_venv(interpreter, dest)
    _run([venv_python, "-m", "pip", "install", "-q", "--upgrade", "pip"],
         f"upgrading pip in {dest}")
    _run([venv_python, "-m", "pip", "install", "-q", *requirements, "ipykernel"],
         f"pip install {' '.join(requirements)} ipykernel (env {name})")
    if colab:
        _add_colab(site_packages)
    versions = report_versions(venv_python)
    seconds = time.monotonic() - started
    stamp.write_text(json.dumps({"digest": digest, "key": key, "versions": versions,
                                 "build_seconds": seconds}, indent=1))
    env = StudentEnv(name, venv_python, versions)
    print(f"studentenv: {name} built in {seconds:.0f} s at {dest} ({env.describe()})")
    return env


def build_seconds(env: StudentEnv) -> float | None:
    """How long `built_env` took to build ``env`` (None for other environments)."""
    stamp = env.python.parent.parent / _STAMP
    return json.loads(stamp.read_text()).get("build_seconds") if stamp.exists() else None


def install_labkit(env: StudentEnv, source: Path = KIT_ROOT / "student",
                   pip_args: tuple[str, ...] = ()) -> StudentEnv:
    """``env`` with labkit installed from ``source`` as a student would (`pip install
    ./student`, not editable; any labkit there before is removed first), with
    ``pip_args`` added (e.g. "--no-deps"). Built from a copy, so that
    setuptools' build/ and egg-info land outside the checkout.
    Returns the env with its versions asked again."""
    with tempfile.TemporaryDirectory(prefix="labkit-src-") as temp:
        copy = Path(temp) / "student"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", "dist"))
        _run([env.python, "-m", "pip", "uninstall", "-q", "-y", "labkit"],
             f"pip uninstall labkit (env {env.name})", timeout=600)
        _run([env.python, "-m", "pip", "install", "-q", *pip_args, copy],
             f"pip install ./student (env {env.name})", timeout=1200)
    return StudentEnv(env.name, env.python, report_versions(env.python))


def _write_kernelspec(env: StudentEnv, kernels: Path) -> str:
    """A kernelspec in ``kernels`` that starts ``env``'s interpreter; returns its name."""
    name = "studentenv"
    folder = kernels / name
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps({
        "argv": [str(env.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"student env {env.name}", "language": "python",
    }))
    return name


def cell_errors(notebook: NotebookNode) -> list[str]:
    """One message per code cell of an executed notebook that raised:
    "<grade_id or cell N>: <ename>: <evalue>"."""
    messages = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        label = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                messages.append(f"{label}: {output.get('ename')}: {output.get('evalue')}")
    return messages


def run_notebook(notebook: NotebookNode, env: StudentEnv, timeout: int = 600,
                 cwd: Path | None = None, extra_env: dict | None = None
                 ) -> tuple[NotebookNode, list[str]]:
    """Execute every cell of (a copy of) ``notebook`` in a kernel started with
    ``env``'s interpreter, going on after errors as a student would.

    ``timeout`` is per cell (seconds); ``cwd`` the kernel's working folder (a
    temporary one by default); ``extra_env`` variables for the kernel, whose
    environment is otherwise the caller's less PYTHONPATH and VIRTUAL_ENV.
    Returns the executed notebook and `cell_errors` of it."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    if not Path(env.python).exists():
        raise StudentEnvError(f"{env.name}: no interpreter at {env.python}; build the "
                              f"environment again (overlay_env or built_env).")
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    with tempfile.TemporaryDirectory(prefix="studentenv-") as temp:
        jupyter_path = Path(temp) / "jupyter"
        kernel_name = _write_kernelspec(env, jupyter_path / "kernels")
        workdir = Path(cwd) if cwd else Path(temp) / "work"
        workdir.mkdir(parents=True, exist_ok=True)
        kernel_env = clean_environ({"JUPYTER_PATH": str(jupyter_path),
                                    "PATH": f"{env.python.parent}{os.pathsep}"
                                            f"{os.environ.get('PATH', '')}",
                                    **(extra_env or {})})
        # The kernelspec is found in the temporary JUPYTER_PATH only, never in
        # the user's or the kit's kernels.
        specs = KernelSpecManager(kernel_dirs=[str(jupyter_path / "kernels")])
        manager = KernelManager(kernel_name=kernel_name, kernel_spec_manager=specs)
        client = NotebookClient(notebook, km=manager, timeout=timeout, allow_errors=True,
                                kernel_name=kernel_name, startup_timeout=120,
                                resources={"metadata": {"path": str(workdir)}})
        try:
            # nbclient shuts down only the kernels of managers it made itself:
            # cleanup_kc, and the check below, so that no kernel outlives its run.
            client.execute(env=kernel_env, cwd=str(workdir), cleanup_kc=True)
        finally:
            if manager.has_kernel:
                manager.shutdown_kernel(now=True)
    return notebook, cell_errors(notebook)


if __name__ == "__main__":  # python tests/studentenv.py DEST: an overlay, for a look
    made = overlay_env(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
    print(made.python, made.versions)
