"""lab0's hidden tests: one function per graded property, its exercise and
points declared with `graded`, its docstring the sentence students read beside
its tests cell, its parameters the student names it calls (autograder.hidden).
The release writes a call of each into its tests cell of the source notebook.
"""

from autograder.hidden import graded
from autograder.references import lab0 as reference
from autograder.testkernel.testing import assert_close, rng


@graded("scale", points=2)
def test_scale(scale):
    """a batch of inputs times a factor."""
    x = rng("scale").normal(size=(3, 4)).astype("float32")
    assert_close(scale(x, 1.5), reference.scale(x, 1.5), "scale(x (3, 4), 1.5)")


@graded("Doubler", points=1)
def test_Doubler(Doubler):
    """the layer's output, twice its input."""
    x = rng("Doubler").normal(size=(2, 5)).astype("float32")
    assert_close(Doubler()(x), reference.scale(x, 2.0), "Doubler()(x (2, 5))")
