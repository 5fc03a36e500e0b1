"""The numerical policy of the grader, in one place (labkit restates its tolerances: below).

Every comparison of a student's numbers with a reference goes through these
values (see autograder/testkernel/testing.py). References are computed in float64 NumPy
from the same float32 inputs (and, for layers, from the student's own
weights), so the only differences left are float32 rounding in the student's
code. The tolerances below leave room for that and nothing else.

TF32: GPUs from Ampere on may round float32 matmuls to TF32 (relative error
up to ~2e-3). The locked setup cell of every lab turns it off on every
backend (labkit.configure_precision), so the same tolerances hold on
CPU and GPU.

The students' visible checks (labkit.checks, the student package) compare
with the same tolerances. labkit is installed alone in Colab and cannot
import this module, so it states RTOL and ATOL again, and
tests/student/test_student_package.py fails when the two differ. (A generated copy
would still need that test to show it was regenerated; for two numbers the
test is the whole guarantee.) Change them here and in labkit together.

The time a call into the student's kernel may take is a limit like the
others, kept with them in autograder.limits (CALL_TIMEOUT_S).
"""

#: Relative tolerance for float32 results against float64 references.
RTOL = 1e-4
#: Absolute tolerance (matters where the expected value is close to 0).
ATOL = 1e-5
