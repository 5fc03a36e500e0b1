# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 0 — the smallest lab
#
# Two exercises: a function and a Keras layer.

# %% nbgrader="locked" grade_id="setup"
import numpy as np
import keras

# %% [markdown]
# ## 1. Scaling
#
# Write `scale(x, factor)`: every entry of `x` multiplied by `factor`.

# %% nbgrader="solution" grade_id="scale"
def scale(x, factor):
    """`x` times `factor`, entry by entry."""
    ### BEGIN SOLUTION
    return np.asarray(x) * factor
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_scale"
assert np.allclose(scale([1.0, 2.0], 3.0), [3.0, 6.0]), "scale([1, 2], 3) should be [3, 6]"
print("✓ scale")

# %% nbgrader="tests" grade_id="test_scale"

# %% [markdown]
# ## 2. A layer
#
# Write `Doubler`, a `keras.layers.Layer` whose `call(x)` returns `2 * x`.

# %% nbgrader="solution" grade_id="Doubler"
class Doubler(keras.layers.Layer):
    """Doubles its input."""

    ### BEGIN SOLUTION
    def call(self, x):
        return 2 * x
    ### END SOLUTION


# %% nbgrader="locked" grade_id="check_Doubler"
assert np.allclose(keras.ops.convert_to_numpy(Doubler()(np.ones((2, 2), "float32"))), 2.0)
print("✓ Doubler")

# %% nbgrader="tests" grade_id="test_Doubler"
