"""Build the lab3 sample submissions of data/sample_submissions/lab3/.

Each sample is the student notebook of labs/lab3 with its answer cells filled
in the way a real student might: correct answers written differently from the
solution (a `keras.ops` table returned as a tensor, the table made in `build`,
the mask delegated to the Embedding), the mistakes students really make, and
the untouched notebook. `expectations()` says what each one must score,
worked out from the hidden tests cells each mistake fails (CELL_POINTS:
every exercise is graded in parts, so a mistake in one property keeps the
points of the others); tests/test_grading_lab3.py checks it through the real
CLI. Run `python data/sample_submissions/samples_lab3.py` after changing lab 3.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LAB = "lab3"
NOTEBOOK = ROOT / "labs" / LAB / "lab3_positional_embeddings.ipynb"
EXERCISES = ("positional_encoding", "PositionalEmbedding", "LearnedPositionalEmbedding")

#: The hidden tests cells of the lab and their points (as in the lab's source;
#: tests/test_grading_lab3.py checks that they agree).
CELL_POINTS = {
    "test_positional_encoding": 2.0,              # the values, even depths
    "test_positional_encoding__odd_depth": 0.5,
    "test_positional_encoding__dtype": 0.5,       # float32
    "test_PositionalEmbedding": 3.0,              # values and weights
    "test_PositionalEmbedding__mask": 0.5,
    "test_PositionalEmbedding__config": 0.5,
    "test_LearnedPositionalEmbedding": 2.5,       # values and weights
    "test_LearnedPositionalEmbedding__validation": 0.5,   # the ValueError past max_length
    "test_LearnedPositionalEmbedding__mask": 0.25,
    "test_LearnedPositionalEmbedding__config": 0.25,
}

# Correct answers, written differently from the solution.
CORRECT = {
    "positional_encoding": '''
def positional_encoding(length, depth):
    """keras.ops: the angles of each pair, then (sin, cos) stacked and flattened."""
    half = (depth + 1) // 2
    positions = ops.cast(ops.arange(length), "float32")[:, None]          # (length, 1)
    exponents = ops.cast(2 * ops.arange(half), "float32") / depth          # 2i / depth
    angles = positions * ops.power(10000.0, -exponents)[None, :]           # (length, half)
    pairs = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)         # (length, half, 2)
    return ops.reshape(pairs, (length, 2 * half))[:, :depth]
''',
    "PositionalEmbedding": '''
class PositionalEmbedding(keras.layers.Layer):
    """The table is made in build, from my positional_encoding, and kept as a tensor."""

    def __init__(self, vocab_size, d_model, max_length=2048, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size, self.d_model = vocab_size, d_model
        self.max_length, self.mask_zero = max_length, mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.table = ops.convert_to_tensor(positional_encoding(self.max_length, self.d_model))

    def call(self, token_ids):
        x = self.token_embedding(token_ids) * self.scale
        return x + ops.cast(self.table, x.dtype)[None, : ops.shape(x)[1], :]

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0) if self.mask_zero else None

    def get_config(self):
        config = super().get_config()
        config["vocab_size"] = self.vocab_size
        config["d_model"] = self.d_model
        config["max_length"] = self.max_length
        config["mask_zero"] = self.mask_zero
        return config
''',
    "LearnedPositionalEmbedding": '''
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Positions as a (1, T) batch; the mask comes from the token Embedding."""

    def __init__(self, vocab_size, d_model, max_length, mask_zero=True, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, d_model=d_model,
                                 max_length=max_length)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model, mask_zero=mask_zero)
        self.position_embedding = keras.layers.Embedding(max_length, d_model)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.position_embedding.build(input_shape)

    def call(self, token_ids):
        T = token_ids.shape[-1]
        if T is not None and T > self.max_length:
            raise ValueError(f"sequence length {T} exceeds max_length={self.max_length}")
        positions = ops.expand_dims(ops.arange(ops.shape(token_ids)[-1]), 0)   # (1, T)
        return self.token_embedding(token_ids) + self.position_embedding(positions)

    def compute_mask(self, token_ids, mask=None):
        return self.token_embedding.compute_mask(token_ids)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "d_model": self.d_model, "max_length": self.max_length,
                "mask_zero": self.mask_zero}
''',
}


def _swap(source: str, old: str, new: str) -> str:
    assert old in source, old
    return source.replace(old, new)


_SOLUTION_TABLE = '''
def positional_encoding(length, depth):
    positions = np.arange(length)[:, None]
    i = np.arange(depth)[None, :] // 2
    angles = positions / np.power(10000.0, 2 * i / depth)
    table = np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype("float32")
'''

# mistake -> (the exercise it is in, the answer cell with the mistake, the hidden
# tests cells it fails)
MISTAKES = {
    # cos in the even columns, sin in the odd ones: every value is wrong, for
    # even and odd depths; the table is still float32.
    "sin_cos_swapped": ("positional_encoding", _swap(
        _SOLUTION_TABLE, "np.sin(angles), np.cos(angles)", "np.cos(angles), np.sin(angles)"),
        {"test_positional_encoding", "test_positional_encoding__odd_depth"}),
    # pos / 10000^(i / depth) with i the pair index: the frequencies fall too slowly,
    # at any depth; still float32.
    "exponent_i": ("positional_encoding", _swap(
        _SOLUTION_TABLE, "2 * i / depth", "i / depth"),
        {"test_positional_encoding", "test_positional_encoding__odd_depth"}),
    # The right values in float64: only the dtype is wrong.
    "float64_table": ("positional_encoding", _swap(
        _SOLUTION_TABLE, 'return table.astype("float32")', "return table"),
        {"test_positional_encoding__dtype"}),
    # Token vectors added as they are: the values are wrong, the weights, the mask
    # and the config are right.
    "no_sqrt_scaling": ("PositionalEmbedding", _swap(
        CORRECT["PositionalEmbedding"], "self.scale = math.sqrt(d_model)", "self.scale = 1.0"),
        {"test_PositionalEmbedding"}),
    # The sinusoidal table as a trainable weight: right numbers, wrong weights (the
    # values-and-weights cell), right mask and config.
    "trainable_table": ("PositionalEmbedding", _swap(
        CORRECT["PositionalEmbedding"],
        "self.table = ops.convert_to_tensor(positional_encoding(self.max_length, self.d_model))",
        "self.table = self.add_weight(shape=(self.max_length, self.d_model),\n"
        "                                     initializer=\"zeros\", trainable=True)\n"
        "        self.table.assign(positional_encoding(self.max_length, self.d_model))"),
        {"test_PositionalEmbedding"}),
    # get_config left as the base config (the stub's lines kept, nothing added):
    # only the config is wrong.
    "no_get_config": ("PositionalEmbedding", _swap(
        CORRECT["PositionalEmbedding"],
        '''        config["vocab_size"] = self.vocab_size
        config["d_model"] = self.d_model
        config["max_length"] = self.max_length
        config["mask_zero"] = self.mask_zero
''', ""),
        {"test_PositionalEmbedding__config"}),
    # No check of the length: the look-up past the table fails (TensorFlow) or
    # silently clamps (JAX), never with a clear ValueError. Only the length limit
    # is wrong.
    "learned_no_length_check": ("LearnedPositionalEmbedding", _swap(
        CORRECT["LearnedPositionalEmbedding"],
        "        if T is not None and T > self.max_length:\n"
        "            raise ValueError(f\"sequence length {T} exceeds max_length={self.max_length}\")\n",
        ""),
        {"test_LearnedPositionalEmbedding__validation"}),
    # The scaling of the sinusoidal layer copied into the learned one: the values
    # are wrong; the length limit, the mask and the config are right.
    "learned_scaled": ("LearnedPositionalEmbedding", _swap(
        CORRECT["LearnedPositionalEmbedding"],
        "return self.token_embedding(token_ids) + self.position_embedding(positions)",
        "return self.token_embedding(token_ids) * math.sqrt(self.d_model) + "
        "self.position_embedding(positions)"),
        {"test_LearnedPositionalEmbedding"}),
}

# student file -> mistakes in it
SAMPLES = {
    "alice.ipynb": set(),
    # bob's PositionalEmbedding calls his wrong positional_encoding: the grader's
    # stand-in keeps that from costing him a second time.
    "bob.ipynb": {"sin_cos_swapped"},
    "carol.ipynb": {"exponent_i", "learned_no_length_check"},
    "erin.ipynb": {"no_sqrt_scaling"},
    "frank.ipynb": {"trainable_table"},
    "grace.ipynb": {"learned_scaled"},
    # Right computations, two secondary properties missed.
    "heidi.ipynb": {"float64_table", "no_get_config"},
}

UNTOUCHED = "dave.ipynb"


def _fill(notebook, answers: dict[str, str]):
    for cell in notebook.cells:
        nbgrader = cell.metadata.get("nbgrader", {})
        if nbgrader.get("solution") and nbgrader.get("grade_id") in answers:
            cell.source = answers[nbgrader["grade_id"]].strip("\n")
    return notebook


def _copy(notebook):
    return nbformat.from_dict(json.loads(json.dumps(notebook)))


def _exercise_of(grade_id: str) -> str:
    return grade_id.removeprefix("test_").split("__")[0]


def expectations() -> dict[str, dict[str, object]]:
    """What each sample must score: {file: {exercise: "kept" | points}}: "kept" is
    full marks; otherwise the points of the tests cells its mistakes do not fail."""
    expected = {}
    for name, mistakes in SAMPLES.items():
        failed = set().union(*(MISTAKES[mistake][2] for mistake in mistakes))
        expected[name] = {}
        for exercise in EXERCISES:
            cells = {cell: points for cell, points in CELL_POINTS.items()
                     if _exercise_of(cell) == exercise}
            if failed.isdisjoint(cells):
                expected[name][exercise] = "kept"
            else:
                expected[name][exercise] = sum(points for cell, points in cells.items()
                                               if cell not in failed)
    expected[UNTOUCHED] = {e: 0.0 for e in EXERCISES}
    return expected


def build() -> dict[str, dict[str, object]]:
    """Write data/sample_submissions/lab3/; return expectations()."""
    student = nbformat.read(NOTEBOOK, as_version=4)
    folder = HERE / LAB
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, mistakes in SAMPLES.items():
        answers = dict(CORRECT)
        for mistake in mistakes:
            exercise, code, _failed = MISTAKES[mistake]
            assert exercise not in answers or answers[exercise] == CORRECT[exercise], \
                (name, mistake, "two mistakes in one exercise")
            answers[exercise] = code
        nbformat.write(_fill(_copy(student), answers), folder / name)
    # Untouched: the released notebook as downloaded.
    nbformat.write(student, folder / UNTOUCHED)
    return expectations()


if __name__ == "__main__":
    for sample, outcome in build().items():
        total = sum(sum(points for cell, points in CELL_POINTS.items()
                        if _exercise_of(cell) == exercise) if value == "kept" else value
                    for exercise, value in outcome.items())
        print(sample, f"{total:g} / {sum(CELL_POINTS.values()):g}")
