"""Build the sample submissions of data/sample_submissions/<lab>/.

Each lab's samples live in its folder, solutions/<lab>/samples.py: realistic
answer cells (right ones written differently from the solution, the mistakes
students really make), the untouched notebook and, for some labs, a copy
saved by Colab and a download cut short. tests/samples.py builds them and
says what each must score; tests/grader/test_grading.py checks it through the real
CLI, and `make demo` grades them. Run

    python data/sample_submissions/build.py [lab ...]

after changing a lab (all labs with a samples.py when none is named).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:           # run as a script: the kit's packages
    sys.path.insert(0, str(ROOT))

from tests.samples import build_all, load  # noqa: E402

#: The answers the hostile suite (tests/hostile/cases.py, trust.py) builds its
#: submissions from: it loads this file and reads these two names.
LAB1_CORRECT = load("lab1").CORRECT
LAB2_MISTAKES = load("lab2").MISTAKES


if __name__ == "__main__":
    build_all(sys.argv[1:])
