"""The submissions' public names, kept where the grader imports them from.

The code is in the package autograder.grader.submissions (archives.py:
reading folders and zips; lms.py: the LMS naming rules and student ids;
choice.py: the file graded for each student); see its docstrings.
"""

from autograder.grader.submissions import *  # noqa: F403 - the facade
from autograder.grader.submissions import __all__  # noqa: F401
