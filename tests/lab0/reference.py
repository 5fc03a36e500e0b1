"""lab0's reference: written apart from the solution, in float64."""

import numpy as np


def scale(x, factor):
    return np.asarray(x, dtype=np.float64) * factor
