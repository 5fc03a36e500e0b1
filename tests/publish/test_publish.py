"""`python -m autograder publish`: the student repository, and nothing else.

The student's whole path from that repository (install in a Colab-like
kernel, checks, a full-marks grade) is tests/student/test_student_path.py.
"""

from __future__ import annotations

import ast
import base64
import bz2
import codecs
import gzip
import hashlib
import html
import io
import json
import lzma
import re
import shutil
import struct
import subprocess
import tarfile
import zipfile
import zlib

import nbformat
import pytest

from autograder import labs as labs_module
from autograder.publish import repository as publish_module
from autograder.publish.leaks import Scanner
from autograder.publish.repository import PublishError, publish
from autograder.labs import (PLACEHOLDER_REPOSITORY, available_labs, public_repository_problem,
                             public_settings)
from tests.conftest import run_cli

REPOSITORY = "https://github.com/acme-university/transformer-labs"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    dest = tmp_path_factory.mktemp("published") / "student-repo"
    return publish(dest, repository=REPOSITORY, ref="v2026.1", git=shutil.which("git") is not None)


def test_the_repository_holds_labs_labkit_readme_and_licence_only(published):
    top = {entry.name for entry in published.dest.iterdir()} - {".git"}
    assert top == {"README.md", "LICENSE", "labs", "student"}
    notebooks = sorted(str(path.relative_to(published.dest))
                       for path in published.dest.glob("labs/*/*.ipynb"))
    assert notebooks == [f"labs/{lab.id}/{lab.notebook}.ipynb" for lab in available_labs()]
    assert not [name for name in published.files
                if re.search(r"(egg-info|__pycache__|\.pyc$|/build/|solutions|autograder)", name)]
    assert (published.dest / "student" / "labkit" / "checks.py").exists()
    assert "MIT License" in (published.dest / "LICENSE").read_text()


def test_the_labs_install_labkit_from_the_course_repository_at_its_tag(published):
    for lab in available_labs():
        notebook = nbformat.read(published.dest / "labs" / lab.id / f"{lab.notebook}.ipynb", 4)
        setup = next(cell for cell in notebook.cells if cell.cell_type == "code")
        assert f"labkit @ git+{REPOSITORY}@v2026.1#subdirectory=student" in setup.source
        assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")


def test_the_readme_opens_each_lab_in_colab_at_the_tag(published):
    readme = (published.dest / "README.md").read_text()
    for lab in available_labs():
        url = (f"https://colab.research.google.com/github/acme-university/transformer-labs/"
               f"blob/v2026.1/labs/{lab.id}/{lab.notebook}.ipynb")
        assert url in readme and published.colab_urls[lab.id] == url
    assert PLACEHOLDER_REPOSITORY.removeprefix("https://github.com/") not in readme
    assert readme == (published.dest / "student" / "README.md").read_text()
    # Its relative links lead to files of the published repository.
    for target in re.findall(r"\]\((?!https?://)([^)#]+)", readme):
        assert (published.dest / target).exists(), f"README links to {target}, not published"


def test_nothing_of_the_instructor_is_published(published, scanner):
    # No false positive: the real notebooks, labkit (its checkpoints' HDF5
    # weights included: read, not listed) and the README pass.
    assert scanner.tree_leaks(published.dest) == []
    assert any(name.endswith(".weights.h5") for name in published.files)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_commits_and_tags_and_a_tag_is_never_moved(published):
    tags = subprocess.run(["git", "tag"], cwd=published.dest, capture_output=True, text=True)
    assert tags.stdout.split() == ["v2026.1"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=published.dest,
                            capture_output=True, text=True)
    assert status.stdout == ""
    with pytest.raises(PublishError, match="already has the tag 'v2026.1'.*new `ref`"):
        publish(published.dest, repository=REPOSITORY, ref="v2026.1", replace=True, git=True)
    assert (published.dest / "labs").is_dir(), "a refused publication must not touch the folder"


def test_the_placeholder_repository_is_refused_saying_what_to_set(tmp_path):
    with public_settings(repository=PLACEHOLDER_REPOSITORY):
        problem = public_repository_problem()
    assert problem and "course.toml" in problem and "[public]" in problem and "make labs" in problem
    result = run_cli("publish", str(tmp_path / "out"), "--repository", PLACEHOLDER_REPOSITORY + "/")
    assert result.returncode == 2
    assert "placeholder" in result.stderr and "repository" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_kits_own_settings_are_still_the_placeholder_so_release_warns():
    # The kit ships the placeholder on purpose: an instructor must set it.
    # `make labs` (the CLI's release) prints the same problem as a warning.
    assert public_repository_problem() is not None


def test_a_folder_with_other_files_is_never_cleared(tmp_path):
    dest = tmp_path / "home"
    dest.mkdir()
    (dest / "thesis.tex").write_text("precious")
    for replace in (False, True):
        with pytest.raises(PublishError, match="thesis.tex, which publish did not write"):
            publish(dest, repository=REPOSITORY, ref="v1", replace=replace)
    assert (dest / "thesis.tex").read_text() == "precious"


def test_an_earlier_publication_is_replaced_only_when_asked(tmp_path):
    dest = tmp_path / "repo"
    publish(dest, repository=REPOSITORY, ref="v1")
    (dest / "labs" / "stale.ipynb").write_text("{}")
    with pytest.raises(PublishError, match="--replace"):
        publish(dest, repository=REPOSITORY, ref="v2")
    publish(dest, repository=REPOSITORY, ref="v2", replace=True)
    assert not (dest / "labs" / "stale.ipynb").exists()
    assert "@v2#subdirectory" in (dest / "labs" / "lab1" / "lab1_attention.ipynb").read_text()


def test_publishing_into_the_kit_is_refused():
    with pytest.raises(PublishError, match="the kit itself"):
        publish(labs_module.KIT_ROOT, repository=REPOSITORY, ref="v1")


def test_a_leak_in_labkit_stops_the_publication(one_lab_kit, tmp_path):
    (one_lab_kit / "student" / "labkit" / "answers.py").write_text(
        "# kept for later\n" + restyled(answers(available_labs()[0])))
    with pytest.raises(PublishError) as refused:
        publish(tmp_path / "out", repository=REPOSITORY, ref="v1")
    message = str(refused.value)
    # What was found (file, lab and exercise, the line), what was expected, the fix.
    assert re.search(r"student/labkit/answers.py: lab1's solution of dot_scores "
                     r"\(solutions/lab1/lab1_attention.py, line \d+\): \d+ tokens of it from "
                     r"line \d+: 'query = np.asarray\(query,\)'", message), message
    assert "Expected: the labs as `make labs` releases them" in message
    assert "Fix: keep solutions between ### BEGIN SOLUTION" in message
    assert not (tmp_path / "out" / "labs").exists()


def test_the_scanner_finds_markers_and_hidden_lines_in_a_notebook(tmp_path, scanner):
    lab = available_labs()[1]
    student = json.loads(lab.student_path.read_text())
    student["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                             "execution_count": None,
                             "source": "### BEGIN HIDDEN TESTS\nfrom autograder.references "
                                       "import lab2\n"})
    (tmp_path / "leaky.ipynb").write_text(json.dumps(student))
    (tmp_path / "clean.ipynb").write_text(lab.student_path.read_text())
    found = scanner.tree_leaks(tmp_path)
    assert {leak.path for leak in found} == {"leaky.ipynb"}
    assert {"contains 'BEGIN HIDDEN TESTS'", "contains 'autograder.references'"} <= \
        {leak.what for leak in found}
    assert {leak.where for leak in found} == {f"cell {len(student['cells'])} (code)"}


# --- the leak scanner: every form a red team published a solution in (issue 32) ----------

def answers(lab) -> str:
    """``lab``'s answer cells as a student fills them: every exercise's
    signature and solution, markers dropped (a whole lab's solution)."""
    cells = re.split(r"^# %%", lab.source_path.read_text(), flags=re.M)
    return "\n\n".join(re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION\n", "", cell.split("\n", 1)[1],
                               flags=re.M)
                        for cell in cells if 'nbgrader="solution"' in cell.split("\n", 1)[0])


def restyled(code: str) -> str:
    """``code`` as another formatter and another hand write it: re-printed from
    its syntax tree (single quotes, no comments, other line breaks, spacing and
    parentheses, 1e-09 for 1e-9), indented by 2, trailing commas added, other
    comments: the same code, not one line of it the same."""
    lines = []
    for line in ast.unparse(ast.parse(code)).splitlines():
        indent = len(line) - len(line.lstrip())
        line = " " * (indent // 2) + line.lstrip()
        if re.search(r"[^(,\s]\)$", line) and not line.lstrip().startswith(("def ", "class ")):
            line = line[:-1] + ",)"  # black's magic trailing comma
        lines += [line, " " * (indent // 2) + "# my own idea"] if line.endswith(":") else [line]
    text = "\n".join(lines) + "\n"
    ast.parse(text)  # still Python
    return text


def found_units(leaks) -> set[str]:
    return {leak.what.split(" (")[0] for leak in leaks if leak.kind == "leak"}


def planted(tmp_path, name: str, content: bytes | str):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


@pytest.fixture(scope="module")
def scanner():
    return Scanner(available_labs())


@pytest.fixture(scope="module")
def lab1_answers():
    lab = available_labs()[0]
    return answers(lab), {f"lab1's solution of {name}" for name in lab.exercises}


@pytest.fixture
def one_lab_kit(tmp_path, monkeypatch):
    """A kit whose student/ is a copy to plant in, publishing lab 1 alone (fast)."""
    kit = tmp_path / "kit"
    shutil.copytree(labs_module.KIT_ROOT / "student", kit / "student",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    monkeypatch.setattr(publish_module, "KIT_ROOT", kit)
    monkeypatch.setattr(publish_module, "available_labs", lambda: available_labs()[:1])
    return kit


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_a_whole_labs_solution_restyled_is_found_exercise_by_exercise(lab, scanner):
    code = answers(lab)
    as_written = found_units(scanner.text_leaks("answers.py", code))
    assert found_units(scanner.text_leaks("answers.py", restyled(code))) == as_written
    # Every exercise, less those a later lab gives as provided code (public).
    assert len(as_written) >= len(lab.exercises) - 2, as_written
    if lab.id == "lab1":
        assert as_written == {f"lab1's solution of {name}" for name in lab.exercises}


def test_common_and_provided_code_is_no_leak(scanner):
    lab = available_labs()[0]
    common = ("def f(x):\n    return x\n\nx = np.asarray(x)\nreturn np.sum(x, axis=-1)\n"
              "from __future__ import annotations\nimport numpy as np\n")
    assert scanner.text_leaks("common.py", common) == []
    # The student notebook holds the provided code, the signatures and the checks.
    assert scanner.text_leaks(lab.student_path.name, lab.student_path.read_text()) == []


@pytest.mark.parametrize("encoding", ["one latin-1 byte", "cp1252", "utf-16 with a BOM",
                                      "utf-16 without a BOM", "utf-16 without a BOM, ASCII only",
                                      "utf-8 with a BOM"])
def test_a_solution_in_any_text_encoding_is_found(encoding, tmp_path, scanner, lab1_answers):
    code, units = lab1_answers
    text = "# Réponses de l'étudiant — « copiées »\n" + code
    data = {"one latin-1 byte": lambda: text.replace("—", "-").replace("«", '"').replace(
                "»", '"').encode("latin-1"),
            "cp1252": lambda: text.encode("cp1252"),
            "utf-16 with a BOM": lambda: text.encode("utf-16"),
            "utf-16 without a BOM": lambda: text.encode("utf-16-le"),
            "utf-16 without a BOM, ASCII only": lambda: code.encode("utf-16-be"),
            "utf-8 with a BOM": lambda: text.encode("utf-8-sig")}[encoding]()
    planted(tmp_path, "student/labkit/notes.py", data)
    assert found_units(scanner.tree_leaks(tmp_path)) == units



#: A solution written out in an encoding, as a whole file: (the text, where the scanner says
#: it found it).
ENCODED = {
    "hex": (lambda raw: raw.hex(), "hex-decoded"),
    "hex, bytes apart": (lambda raw: raw.hex(" ", 1), "hex-decoded"),
    "hex as \\x escapes": (lambda raw: "".join(f"\\x{byte:02x}" for byte in raw), "hex-decoded"),
    "base85 (b85encode)": (lambda raw: base64.b85encode(raw).decode(), "base85-decoded"),
    "ascii85 (a85encode)": (lambda raw: base64.a85encode(raw).decode(), "ascii85-decoded"),
    "ascii85, Adobe's, wrapped": (lambda raw: base64.a85encode(raw, adobe=True, wrapcol=76)
                                  .decode(), "ascii85-decoded"),
    "rot13": (lambda raw: codecs.encode(raw.decode(), "rot13"), "rot13-decoded"),
    "reversed": (lambda raw: raw.decode()[::-1], "reversed"),
}


@pytest.mark.parametrize("form", ENCODED)
def test_a_solution_written_out_in_an_encoding_is_found(form, tmp_path, scanner, lab1_answers):
    code, units = lab1_answers
    encode, where = ENCODED[form]
    text = encode(restyled(code).encode())
    assert "query = np" not in text and "def " not in text
    planted(tmp_path, "student/labkit/notes.txt", text)
    found = scanner.tree_leaks(tmp_path)
    assert found_units(found) == units
    assert {leak.where for leak in found} == {where}


#: The same solution in a notebook's cell that decodes and runs it: the encoded
#: run starts and ends inside other code.
DECODED_AND_RUN = {
    "hex": lambda raw: f"exec(bytes.fromhex('{raw.hex()}'))",
    "base85 (b85encode)": lambda raw: f"exec(base64.b85decode('{base64.b85encode(raw).decode()}'))",
    "ascii85 (a85encode)": lambda raw: 'exec(base64.a85decode(b"""%s"""))'
                                       % base64.a85encode(raw).decode(),
    "rot13": lambda raw: f"exec(codecs.decode({codecs.encode(raw.decode(), 'rot13')!r}, 'rot13'))",
    "reversed": lambda raw: f"exec({raw.decode()[::-1]!r}[::-1])",
}


@pytest.mark.parametrize("form", DECODED_AND_RUN)
def test_a_solution_that_a_notebook_decodes_and_runs_is_found(form, tmp_path, scanner,
                                                              lab1_answers):
    code, units = lab1_answers
    source = "import base64, codecs\n" + DECODED_AND_RUN[form](code.encode())
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": source}
    planted(tmp_path, "labs/lab1/lab1_attention.ipynb", _notebook_with(cell))
    found = scanner.tree_leaks(tmp_path)
    assert found_units(found) == units
    assert {leak.path for leak in found} == {"labs/lab1/lab1_attention.ipynb"}
    assert all(leak.where.startswith("cell 4 (code) > ") for leak in found), found


@pytest.mark.parametrize("lab", available_labs(), ids=lambda lab: lab.id)
def test_the_labs_notebooks_and_encoded_noise_are_no_leak(lab, scanner):
    # Hashes, random bytes in every encoding and prose ("file", "fed": "elif"
    # and "def" reversed) decode to nothing the scanner reports.
    text = lab.student_path.read_text()
    assert scanner.text_leaks(lab.student_path.name, text) == []
    noise = bytes(range(256)) * 4
    ordinary = "\n".join([
        "The file is fed to the model; elif and self are words here.",
        hashlib.sha256(text.encode()).hexdigest(), noise.hex(), noise.hex(" ", 1),
        base64.b85encode(noise).decode(), base64.a85encode(noise, adobe=True).decode(),
        base64.b64encode(noise).decode()])
    assert scanner.text_leaks("notes.md", ordinary) == []
    cell = {"cell_type": "markdown", "metadata": {}, "source": ordinary}
    assert scanner.text_leaks(lab.student_path.name, _notebook_with(cell)) == []


@pytest.mark.parametrize("form", ENCODED)
def test_a_student_notebook_in_an_encoding_is_no_leak(form, scanner):
    # What the labs give students stays public however it is encoded.
    lab = available_labs()[0]
    encode, _ = ENCODED[form]
    assert scanner.text_leaks("notebook.txt", encode(lab.student_path.read_bytes())) == []


def _tar_gz(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("form", [".gz", ".bz2", ".xz", ".zip", ".tar.gz in a .zip",
                                  ".gz named .txt"])
def test_a_solution_packed_in_an_archive_is_found(form, tmp_path, scanner, lab1_answers):
    code, units = lab1_answers
    raw = restyled(code).encode()
    name, data = {".gz": ("answers.py.gz", lambda: gzip.compress(raw)),
                  ".bz2": ("answers.py.bz2", lambda: bz2.compress(raw)),
                  ".xz": ("answers.py.xz", lambda: lzma.compress(raw)),
                  ".zip": ("answers.zip", lambda: _zip({"lab1/answers.py": raw})),
                  ".tar.gz in a .zip": ("bundle.zip", lambda: _zip(
                      {"inner.tar.gz": _tar_gz("deep/answers.py", raw)})),
                  ".gz named .txt": ("readme.txt", lambda: gzip.compress(raw))}[form]
    planted(tmp_path, f"student/{name}", data())
    found = scanner.tree_leaks(tmp_path)
    assert found_units(found) == units
    if form == ".tar.gz in a .zip":
        assert found[0].where == "inner.tar.gz > gzip-decompressed > deep/answers.py"


def _notebook_with(cell: dict) -> str:
    notebook = json.loads(available_labs()[0].student_path.read_text())
    notebook["cells"].insert(3, cell)
    return json.dumps(notebook, indent=1)


def test_a_solution_in_a_notebooks_attachment_is_found(tmp_path, scanner, lab1_answers):
    code, units = lab1_answers
    encoded = base64.b64encode(code.encode()).decode()
    cell = {"cell_type": "markdown", "metadata": {}, "source": "![notes](attachment:notes.py)",
            "attachments": {"notes.py": {"text/x-python": encoded}}}
    planted(tmp_path, "labs/lab1/lab1_attention.ipynb", _notebook_with(cell))
    found = scanner.tree_leaks(tmp_path)
    assert found_units(found) == units
    assert {leak.where for leak in found} == {"cell 4 attachment 'notes.py' (text/x-python)"}


def highlighted(code: str) -> str:
    """``code`` as Jupyter shows highlighted code: a span a token, escaped."""
    spans = re.sub(r"\w+|[^\w\s]+",
                   lambda match: f'<span class="n">{html.escape(match.group())}</span>', code)
    return f'<div class="highlight"><pre>{spans}</pre></div>'


def test_a_solution_in_a_notebooks_html_output_is_found(tmp_path, scanner, lab1_answers):
    code, units = lab1_answers
    page = highlighted(code)
    assert "&quot;" in page and "<span" in page and "query = np" not in page
    cell = {"cell_type": "code", "metadata": {}, "execution_count": 3, "source": "show()",
            "outputs": [{"output_type": "display_data", "metadata": {},
                         "data": {"text/html": page.splitlines(keepends=True),
                                  "text/plain": ["<IPython.core.display.HTML object>"]}}]}
    planted(tmp_path, "labs/lab1/lab1_attention.ipynb", _notebook_with(cell))
    found = scanner.tree_leaks(tmp_path)
    assert found_units(found) == units
    assert all(leak.where.startswith("cell 4 output 1 (text/html)") for leak in found)


def test_hidden_tests_in_an_ansi_coloured_traceback_are_found(tmp_path, scanner):
    lab = available_labs()[0]
    hidden = (lab.folder / "hidden.py").read_text()   # the hidden tests as a module
    body = hidden[hidden.index("def test_softmax("):].splitlines()
    start = next(index for index, line in enumerate(body) if "rng(" in line)
    lines = body[start:start + 8]
    assert not any("import" in line for line in lines)
    context = [f"\x1b[0;32m{'---->' if row == 13 else '':>5} {row:>2}\x1b[0m "
               + re.sub(r"(\w+)", "\x1b[38;5;28m\\1\x1b[39m", line)
               for row, line in enumerate(lines, 10)]
    traceback = ["\x1b[0;31m" + "-" * 75 + "\x1b[0m",
                 "\x1b[0;31mAssertionError\x1b[0m    Traceback (most recent call last)",
                 "Cell \x1b[0;32mIn[7], line 13\x1b[0m", *context, "",
                 "\x1b[0;31mAssertionError\x1b[0m: softmax: some weights are negative."]
    cell = {"cell_type": "code", "metadata": {}, "execution_count": 7, "source": "check()",
            "outputs": [{"output_type": "error", "ename": "AssertionError",
                         "evalue": "softmax", "traceback": traceback}]}
    planted(tmp_path, "labs/lab1/lab1_attention.ipynb", _notebook_with(cell))
    found = scanner.tree_leaks(tmp_path)
    assert found_units(found) == {"lab1's hidden tests of test_softmax"}, found
    assert found[0].where.startswith("cell 4 output 1 (traceback)")


def _png(chunks: list[tuple[bytes, bytes]]) -> bytes:
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body)))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + b"".join(
        chunk(kind, body) for kind, body in chunks) + chunk(b"IDAT", zlib.compress(b"\0\0"))
        + chunk(b"IEND", b""))


def test_data_that_cannot_hold_code_is_read_and_text_inside_it_too(tmp_path, scanner,
                                                                    lab1_answers):
    import h5py
    import numpy as np

    code, units = lab1_answers
    clean = tmp_path / "clean"
    planted(clean, "student/logo.png", _png([(b"tEXt", b"Software\0matplotlib")]))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, weights=np.ones((4, 4), "float32"), ids=np.arange(5))
    planted(clean, "student/arrays.npz", buffer.getvalue())
    with h5py.File(clean / "student" / "model.weights.h5", "w") as handle:
        handle.create_dataset("layers/dense/vars/0", data=np.zeros((3, 3), "float32"))
    assert scanner.tree_leaks(clean) == []
    leaky = tmp_path / "leaky"
    planted(leaky, "student/logo.png", _png([(b"zTXt", b"Comment\0\0" + zlib.compress(
        code.encode()))]))
    with h5py.File(leaky / "student" / "model.weights.h5", "w") as handle:
        handle.attrs["notes"] = code
    planted(leaky, "student/bytes.npy", _npy(np.frombuffer(code.encode(), "uint8")))
    found = scanner.tree_leaks(leaky)
    assert {leak.path for leak in found} == {"student/logo.png", "student/model.weights.h5",
                                             "student/bytes.npy"}
    assert found_units(found) == units


def _npy(array) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _encrypted_zip() -> bytes:
    data = bytearray(_zip({"answers.py": b"x = 1\n"}))
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        where = data.index(signature)
        data[where + offset] |= 0x1  # the "encrypted" flag
    return bytes(data)


@pytest.mark.parametrize("form", ["an image it cannot read", "an unknown archive",
                                  "an encrypted zip member", "a pickled array", "a zip bomb"])
def test_what_the_scanner_cannot_read_is_reported_unless_allowed(form, tmp_path, scanner,
                                                                 monkeypatch):
    import numpy as np

    from autograder.publish import decode

    monkeypatch.setattr(decode, "MAX_MEMBER_BYTES", 1 << 20)
    noise = bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype="uint8"))
    name, data, where = {
        "an image it cannot read": ("photo.jpg", b"\xff\xd8\xff\xe0" + noise, ""),
        "an unknown archive": ("answers.7z", b"7z\xbc\xaf\x27\x1c" + noise, ""),
        "an encrypted zip member": ("answers.zip", _encrypted_zip(), "answers.py"),
        "a pickled array": ("objects.npy", _npy(np.array([{"a": 1}], dtype=object)), ""),
        "a zip bomb": ("zeros.gz", gzip.compress(bytes(2 << 20)), ""),
    }[form]
    planted(tmp_path, f"student/labkit/{name}", data)
    found = scanner.tree_leaks(tmp_path)
    assert [(leak.path, leak.where, leak.kind) for leak in found] == \
        [(f"student/labkit/{name}", where, "unreadable")], found
    assert scanner.tree_leaks(tmp_path, allow=["student/labkit/*"]) == []
    assert scanner.tree_leaks(tmp_path, allow=[f"student/**/{name}"]) == []
    assert scanner.tree_leaks(tmp_path, allow=["labs/*"]) == found


def test_an_unreadable_file_stops_the_publication_unless_course_toml_allows_it(
        one_lab_kit, tmp_path, monkeypatch):
    (one_lab_kit / "student" / "labkit" / "photo.jpg").write_bytes(
        b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(range(256)) * 8)
    with pytest.raises(PublishError) as refused:
        publish(tmp_path / "out", repository=REPOSITORY, ref="v1")
    message = str(refused.value)
    assert "student/labkit/photo.jpg: a JPEG image that the scanner cannot read" in message
    assert 'allow_binary = ["student/labkit/photo.jpg"]' in message
    assert not (tmp_path / "out" / "labs").exists()

    settings = publish_module.course_settings

    def allowing(glob):
        def course_settings():
            values = settings()
            values["public"]["allow_binary"] = glob
            return values
        return course_settings

    monkeypatch.setattr(publish_module, "course_settings", allowing("student/*.jpg"))
    with pytest.raises(PublishError, match="allow_binary must be a list"):
        publish(tmp_path / "out", repository=REPOSITORY, ref="v1", replace=True)
    monkeypatch.setattr(publish_module, "course_settings", allowing(["student/**/*.jpg"]))
    done = publish(tmp_path / "out", repository=REPOSITORY, ref="v1", replace=True)
    assert "student/labkit/photo.jpg" in done.files


def test_a_file_url_without_a_host_is_refused_since_pip_refuses_it(tmp_path):
    # pip: "Invalid requirement: 'labkit @ git+file:///...'" (seen in the Colab-path test).
    with pytest.raises(PublishError, match="file://localhost/<path>"):
        publish(tmp_path / "out", repository=f"file://{tmp_path}/repo", ref="v1")
