"""`python -m autograder`: see autograder.cli."""

import sys

from autograder.cli import main

sys.exit(main())
