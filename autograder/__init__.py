"""The instructor's side of the Transformer lab kit, grouped by where code runs.

- ``autograder.cli``, ``autograder.labs``: the command line and the lab registry.
- ``autograder.grader``: the grading process (release, intake, sandbox,
  execution of notebooks, gradebook, reports). Never runs student code.
- ``autograder.term``: the instructor's term around grading (roster, late
  policy, overrides, similarity, LMS export).
- ``autograder.scaleout``: grading on Gradescope, Slurm and Kubernetes.
- ``autograder.testkernel``: loaded in the test kernel, which runs the hidden
  tests and reaches the student's kernel only through ``probe``.
- ``autograder.studentkernel``: ``glue.py``, read as text and sent to the
  sandboxed student kernel; it answers the probe's requests there.
- ``autograder.kernels.forkserver``: the sandboxed fork server that starts student
  kernels with the libraries already imported.
- ``autograder.references``: the hidden tests' references, one per lab, kept
  in the lab's own folder (``solutions/<lab>/``).
"""

import sys

# jsonschema (imported by nbformat in every grading process) imports
# rfc3987_syntax when it is installed (jupyter-events asks for it), and that
# module builds a Lark grammar as it is imported, in each process (the cost:
# docs/performance.md, "Why the code is shaped this way"), for the "iri" format check that nothing in the kit uses (nbformat validates a
# notebook's structure, never IRI strings). Marked absent here, jsonschema
# skips that one check (its import is in a `suppress(ImportError)`).
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
