"""Build the sample submissions of data/sample_submissions/<lab>/.

Each sample is the student notebook of labs/ with its answer cells filled in
the way a real student might: correct answers written differently from the
solution, the mistakes students really make, an untouched notebook, a copy
saved by Colab, code that raises, a file cut short by a bad download.
build_expectations() (lab1) and build_expectations_lab2() say what each one
must score; tests/test_grading_lab1.py and tests/test_grading_lab2.py check it
through the real CLI. Run `python data/sample_submissions/build.py` after
changing a lab.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

LAB1_CORRECT = {
    "dot_scores": '''
def dot_scores(query, keys):
    """One score per key: einsum over the last axis."""
    return np.einsum("...d,...nd->...n", np.asarray(query), np.asarray(keys))
''',
    "softmax": '''
def softmax(x, axis=-1):
    """Stable softmax: subtract the max before exponentiating."""
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
''',
    "attention_pool": '''
def attention_pool(query, keys, values):
    """Weights from my softmax of my dot scores; context as an einsum."""
    weights = softmax(dot_scores(query, keys), axis=-1)
    context = np.einsum("...n,...nv->...v", weights, np.asarray(values))
    return context, weights
''',
    "bilinear_scores": '''
def bilinear_scores(query, keys, W):
    """q^T W k_i for each key, one loop over the keys."""
    query, keys, W = np.asarray(query), np.asarray(keys), np.asarray(W)
    projected = query @ W                      # (..., d_k)
    scores = [np.sum(projected * keys[..., i, :], axis=-1) for i in range(keys.shape[-2])]
    return np.stack(scores, axis=-1)
''',
    "additive_scores": '''
def additive_scores(query, keys, W1, w2):
    """Split W1 into its query and key halves instead of concatenating."""
    query, keys, W1, w2 = map(np.asarray, (query, keys, W1, w2))
    d_q = query.shape[-1]
    hidden = np.tanh((query @ W1[:d_q])[..., None, :] + keys @ W1[d_q:])
    return hidden @ w2
''',
    "scaled_dot_product_attention": '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """keras.ops throughout; masked scores set to -1e9."""
    d_k = ops.shape(key)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))
    scores = scores / ops.sqrt(ops.cast(d_k, scores.dtype))
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
''',
}

LAB1_MISTAKES = {
    "softmax_overflow": ("softmax", '''
def softmax(x, axis=-1):
    exponentials = np.exp(np.asarray(x))          # no max subtracted: overflows at 1000
    return exponentials / np.sum(exponentials, axis=axis, keepdims=True)
'''),
    "softmax_axis0": ("softmax", '''
def softmax(x, axis=-1):
    x = np.asarray(x)
    exponentials = np.exp(x - np.max(x, axis=0, keepdims=True))
    return exponentials / np.sum(exponentials, axis=0, keepdims=True)   # always axis 0
'''),
    "additive_no_tanh": ("additive_scores", '''
def additive_scores(query, keys, W1, w2):
    query, keys = np.asarray(query), np.asarray(keys)
    pairs = np.concatenate(
        [np.broadcast_to(query[..., None, :], keys.shape[:-1] + query.shape[-1:]), keys], axis=-1)
    return (pairs @ W1) @ w2                      # tanh forgotten
'''),
    "sdpa_scale_by_dk": ("scaled_dot_product_attention", '''
def scaled_dot_product_attention(query, key, value, mask=None):
    d_k = ops.shape(key)[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / d_k   # d_k, not sqrt(d_k)
    if mask is not None:
        scores = ops.where(mask, scores, -1e9)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, value), weights
'''),
    "dot_scores_typo": ("dot_scores", '''
def dot_scores(query, keys):
    return np.asarray(keys) @ np.asarray(queyr)   # typo: NameError when called
'''),
}

# student file -> (answers, expected score per exercise that LOSES points)
LAB1_SAMPLES = {
    "alice.ipynb": ({}, {}),
    "bob.ipynb": ({"softmax_overflow"}, {"softmax"}),
    "carol.ipynb": ({"softmax_axis0", "additive_no_tanh", "sdpa_scale_by_dk"},
                    {"softmax", "additive_scores", "scaled_dot_product_attention"}),
    "frank.ipynb": ({"dot_scores_typo"}, {"dot_scores"}),
}


def _fill(notebook, answers: dict[str, str]):
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = answers[grade_id].strip("\n")
    return notebook


def _colab_metadata(notebook, name="Copy of lab1_attention.ipynb"):
    notebook.metadata["colab"] = {"provenance": [], "toc_visible": True, "name": name}
    notebook.metadata["accelerator"] = "GPU"
    for cell in notebook.cells:
        cell.metadata["id"] = cell.get("id", "x")
        cell.metadata.setdefault("colab", {"base_uri": "https://localhost:8080/"})
    return notebook


def build_expectations() -> dict[str, dict[str, str]]:
    """What each lab1 sample must score: {file: {exercise: 'kept' | 'lost'}}."""
    exercises = list(LAB1_CORRECT)
    expected = {name: {e: ("lost" if e in losing else "kept") for e in exercises}
                for name, (_, losing) in LAB1_SAMPLES.items()}
    expected["dave.ipynb"] = {e: "lost" for e in exercises}
    expected["erin/Copy of lab1_attention.ipynb"] = {e: "kept" for e in exercises}
    expected["heidi.ipynb"] = {e: "lost" for e in exercises}
    return expected


def build_lab1() -> dict[str, dict]:
    """Write the lab1 samples; return {file: {exercise: 'lost' | 'kept'}}."""
    student = nbformat.read(ROOT / "labs" / "lab1" / "lab1_attention.ipynb", as_version=4)
    folder = HERE / "lab1"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, (mistakes, _losing) in LAB1_SAMPLES.items():
        answers = dict(LAB1_CORRECT)
        for mistake in mistakes:
            exercise, code = LAB1_MISTAKES[mistake]
            answers[exercise] = code
        nbformat.write(_fill(nbformat.from_dict(json.loads(json.dumps(student))), answers),
                       folder / name)
    # Untouched: the released notebook as downloaded.
    nbformat.write(student, folder / "dave.ipynb")
    # A copy saved by Colab, in a student folder, all correct.
    (folder / "erin").mkdir()
    copy = _colab_metadata(_fill(nbformat.from_dict(json.loads(json.dumps(student))),
                                 LAB1_CORRECT))
    nbformat.write(copy, folder / "erin" / "Copy of lab1_attention.ipynb")
    # A download cut short: not valid JSON.
    text = nbformat.writes(_fill(nbformat.from_dict(json.loads(json.dumps(student))),
                                 LAB1_CORRECT))
    (folder / "heidi.ipynb").write_text(text[: len(text) // 2])
    return build_expectations()



# --- lab2 -------------------------------------------------------------------------

LAB2_CORRECT = {
    "mha_weight_shapes": '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    """A kernel then a bias for query, key and value, then the output pair."""
    value_dim = value_dim or key_dim
    shapes = []
    for size in (key_dim, key_dim, value_dim):
        shapes += [(d_model, num_heads, size), (num_heads, size)]
    return shapes + [(num_heads, value_dim, d_model), (d_model,)]
''',
    "SelfAttention": '''
class SelfAttention(keras.layers.Layer):
    """One head; einsum for the products, the mask added to the scores."""

    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        if int(key_dim) != key_dim or key_dim < 1:
            raise ValueError(f"key_dim must be a positive integer, got key_dim={key_dim}")
        self.key_dim = key_dim
        self.query_dense = keras.layers.Dense(key_dim)
        self.key_dense = keras.layers.Dense(key_dim)
        self.value_dense = keras.layers.Dense(key_dim)

    def build(self, input_shape):
        for name in ("query_dense", "key_dense", "value_dense"):
            getattr(self, name).build(input_shape)

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        q = self.query_dense(inputs) / math.sqrt(self.key_dim)
        k = self.key_dense(inputs)
        v = self.value_dense(inputs)
        scores = ops.einsum("bqd,bkd->bqk", q, k)
        if attention_mask is not None:
            scores = scores + (1.0 - ops.cast(attention_mask, scores.dtype)) * -1e9
        weights = ops.softmax(scores)
        out = ops.einsum("bqk,bkd->bqd", weights, v)
        return (out, weights) if return_attention_scores else out

    def get_config(self):
        return {**super().get_config(), "key_dim": self.key_dim}
''',
    "split_heads": '''
def split_heads(x, num_heads):
    """Reshape, then swap the time and head axes."""
    batch, length, features = ops.shape(x)
    x = ops.reshape(x, (batch, length, num_heads, features // num_heads))
    return ops.swapaxes(x, 1, 2)
''',
    "merge_heads": '''
def merge_heads(x):
    """Move the heads behind time, then flatten the last two axes."""
    x = ops.moveaxis(x, 1, 2)
    return ops.reshape(x, (ops.shape(x)[0], ops.shape(x)[1], -1))
''',
    "MultiHeadAttention": '''
class MultiHeadAttention(keras.layers.Layer):
    """EinsumDense projections (Keras's own weight layout), -inf masking."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        if num_heads < 1:
            raise ValueError(f"num_heads must be at least 1, got num_heads={num_heads}")
        if key_dim < 1:
            raise ValueError(f"key_dim must be at least 1, got key_dim={key_dim}")
        if not 0 <= dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got dropout={dropout}")
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim
        self.dropout, self.use_bias = dropout, use_bias
        bias = "hk" if use_bias else None
        size = value_dim or key_dim
        self.q_proj = keras.layers.EinsumDense("btd,dhk->bthk", (None, num_heads, key_dim), bias_axes=bias)
        self.k_proj = keras.layers.EinsumDense("btd,dhk->bthk", (None, num_heads, key_dim), bias_axes=bias)
        self.v_proj = keras.layers.EinsumDense("btd,dhk->bthk", (None, num_heads, size), bias_axes=bias)
        self.drop = keras.layers.Dropout(dropout)

    def build(self, query_shape, value_shape, key_shape=None):
        self.q_proj.build(query_shape)
        self.k_proj.build(key_shape or value_shape)
        self.v_proj.build(value_shape)
        self.o_proj = keras.layers.EinsumDense(
            "bthv,hvd->btd", (None, query_shape[-1]), bias_axes="d" if self.use_bias else None)
        self.o_proj.build((None, None, self.num_heads, self.value_dim or self.key_dim))

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        key = value if key is None else key
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        scores = ops.einsum("bqhk,bshk->bhqs", q, k) / math.sqrt(self.key_dim)
        allowed = None
        if attention_mask is not None:
            allowed = ops.expand_dims(ops.cast(attention_mask, "bool"), 1)
        if use_causal_mask:
            t_q, t_k = ops.shape(scores)[2], ops.shape(scores)[3]
            causal = ops.cast(ops.tril(ops.ones((t_q, t_k))), "bool")
            allowed = causal if allowed is None else ops.logical_and(allowed, causal)
        if allowed is not None:
            scores = ops.where(allowed, scores, float("-inf"))
        weights = ops.nan_to_num(ops.softmax(scores, axis=-1))   # all -inf rows: 0, not NaN
        context = ops.einsum("bhqs,bshv->bqhv", self.drop(weights, training=training), v)
        out = self.o_proj(context)
        return (out, weights) if return_attention_scores else out

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                      dropout=self.dropout, use_bias=self.use_bias)
        return config
''',
}

# Correct answers written yet another way: a MultiHeadAttention that calls the
# student's own split_heads / merge_heads, so that a mistake there would
# cascade into it without the grader's stand-ins.
LAB2_VARIANTS = {
    "mha_with_helpers": ("MultiHeadAttention", '''
class MultiHeadAttention(keras.layers.Layer):
    """add_weight in a loop; the heads through my split_heads and merge_heads."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("key_dim", key_dim)):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {name}={value}")
        if dropout < 0 or dropout >= 1:
            raise ValueError(f"dropout must be in [0, 1), got dropout={dropout}")
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim
        self.dropout, self.use_bias = dropout, use_bias
        self.dropout_layer = keras.layers.Dropout(dropout)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = key_shape or value_shape
        size = self.value_dim or self.key_dim
        specs = [("query", (query_shape[-1], self.num_heads, self.key_dim)),
                 ("key", (key_shape[-1], self.num_heads, self.key_dim)),
                 ("value", (value_shape[-1], self.num_heads, size)),
                 ("output", (self.num_heads, size, query_shape[-1]))]
        self.projections = []
        for name, shape in specs:
            kernel = self.add_weight(shape=shape, name=name + "_kernel")
            bias = None
            if self.use_bias:
                bias_shape = shape[-1:] if name == "output" else shape[1:]
                bias = self.add_weight(shape=bias_shape, initializer="zeros", name=name + "_bias")
            self.projections.append((kernel, bias))

    def _heads(self, x, index):
        kernel, bias = self.projections[index]
        d, heads, size = kernel.shape
        y = ops.tensordot(x, ops.reshape(kernel, (d, heads * size)), axes=1)
        if bias is not None:
            y = y + ops.reshape(bias, (-1,))
        return split_heads(y, heads)

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        key = value if key is None else key
        q, k, v = self._heads(query, 0), self._heads(key, 1), self._heads(value, 2)
        scores = ops.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(self.key_dim))
        t_q, t_k = q.shape[2], k.shape[2]
        mask = ops.ones((1, 1, t_q, t_k), dtype="bool")
        if attention_mask is not None:
            mask = ops.logical_and(mask, ops.expand_dims(ops.cast(attention_mask, "bool"), 1))
        if use_causal_mask:
            mask = ops.logical_and(mask, ops.cast(ops.tril(ops.ones((t_q, t_k))), "bool"))
        probabilities = ops.softmax(ops.where(mask, scores, -1e9), axis=-1)
        context = merge_heads(ops.matmul(self.dropout_layer(probabilities, training=training), v))
        kernel, bias = self.projections[3]
        heads, size, d_query = kernel.shape
        out = ops.tensordot(context, ops.reshape(kernel, (heads * size, d_query)), axes=1)
        if bias is not None:
            out = out + bias
        return (out, probabilities) if return_attention_scores else out

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "dropout": self.dropout, "use_bias": self.use_bias}
'''),
}

LAB2_MISTAKES = {
    "split_heads_no_transpose": ("split_heads", '''
def split_heads(x, num_heads):
    batch, length, features = ops.shape(x)
    # right shape, wrong numbers: head 0 gets whole tokens
    return ops.reshape(x, (batch, num_heads, length, features // num_heads))
'''),
    "merge_heads_no_transpose": ("merge_heads", '''
def merge_heads(x):
    batch, heads, length, depth = ops.shape(x)
    return ops.reshape(x, (batch, length, heads * depth))   # forgot to move the heads back
'''),
    "self_attention_softmax_over_queries": ("SelfAttention", '''
class SelfAttention(keras.layers.Layer):
    def __init__(self, key_dim, **kwargs):
        super().__init__(**kwargs)
        if key_dim <= 0:
            raise ValueError(f"key_dim must be positive, got key_dim={key_dim}")
        self.key_dim = key_dim
        self.query_dense = keras.layers.Dense(key_dim)
        self.key_dense = keras.layers.Dense(key_dim)
        self.value_dense = keras.layers.Dense(key_dim)

    def build(self, input_shape):
        self.query_dense.build(input_shape)
        self.key_dense.build(input_shape)
        self.value_dense.build(input_shape)

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        q, k, v = self.query_dense(inputs), self.key_dense(inputs), self.value_dense(inputs)
        scores = ops.matmul(q, ops.transpose(k, (0, 2, 1))) / math.sqrt(self.key_dim)
        if attention_mask is not None:
            scores = ops.where(attention_mask, scores, -1e9)
        weights = ops.softmax(scores, axis=1)        # over the queries, not the keys
        out = ops.matmul(weights, v)
        return (out, weights) if return_attention_scores else out

    def get_config(self):
        return {**super().get_config(), "key_dim": self.key_dim}
'''),
    "mha_scaled_by_d_model": ("MultiHeadAttention",
                              LAB2_CORRECT["MultiHeadAttention"].replace(
                                  "/ math.sqrt(self.key_dim)",
                                  "/ math.sqrt(query.shape[-1])   # d_model, not key_dim")),
    "mha_weight_shapes_output_kernel": ("mha_weight_shapes", '''
def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    value_dim = key_dim if value_dim is None else value_dim
    return [(d_model, num_heads, key_dim), (num_heads, key_dim),
            (d_model, num_heads, key_dim), (num_heads, key_dim),
            (d_model, num_heads, value_dim), (num_heads, value_dim),
            (d_model, num_heads, value_dim), (d_model,)]   # output kernel written like the others
'''),
    "mha_wraps_keras": ("MultiHeadAttention", '''
class MultiHeadAttention(keras.layers.Layer):
    """Keras's own layer inside: right numbers, not the exercise."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        if num_heads < 1 or key_dim < 1 or not 0 <= dropout < 1:
            raise ValueError(f"invalid num_heads={num_heads}, key_dim={key_dim} or dropout={dropout}")
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim
        self.dropout, self.use_bias = dropout, use_bias
        self.inner = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, dropout=dropout,
            use_bias=use_bias)

    def call(self, query, value, key=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        return self.inner(query, value, key=key, attention_mask=attention_mask,
                          return_attention_scores=return_attention_scores,
                          training=training, use_causal_mask=use_causal_mask)

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "dropout": self.dropout, "use_bias": self.use_bias}
'''),
}

# student file -> (answers that replace LAB2_CORRECT's, exercises that LOSE points)
LAB2_SAMPLES = {
    "alice.ipynb": (set(), set()),
    "bob.ipynb": ({"split_heads_no_transpose", "mha_with_helpers"}, {"split_heads"}),
    "carol.ipynb": ({"self_attention_softmax_over_queries", "mha_scaled_by_d_model",
                     "mha_weight_shapes_output_kernel"},
                    {"SelfAttention", "MultiHeadAttention", "mha_weight_shapes"}),
    "frank.ipynb": ({"merge_heads_no_transpose", "mha_with_helpers"}, {"merge_heads"}),
    "grace.ipynb": ({"mha_wraps_keras"}, {"MultiHeadAttention"}),
    "ivan.ipynb": ({"mha_with_helpers"}, set()),
}

LAB2_NOTEBOOK = "lab2_multihead_attention.ipynb"


def build_expectations_lab2() -> dict[str, dict[str, str]]:
    """What each lab2 sample must score: {file: {exercise: 'kept' | 'lost'}}."""
    exercises = list(LAB2_CORRECT)
    expected = {name: {e: ("lost" if e in losing else "kept") for e in exercises}
                for name, (_, losing) in LAB2_SAMPLES.items()}
    expected["dave.ipynb"] = {e: "lost" for e in exercises}
    expected[f"erin/Copy of {LAB2_NOTEBOOK}"] = {e: "kept" for e in exercises}
    expected["heidi.ipynb"] = {e: "lost" for e in exercises}
    return expected


def build_lab2() -> dict[str, dict]:
    """Write the lab2 samples; return {file: {exercise: 'lost' | 'kept'}}."""
    student = nbformat.read(ROOT / "labs" / "lab2" / LAB2_NOTEBOOK, as_version=4)
    folder = HERE / "lab2"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    replacements = {**LAB2_VARIANTS, **LAB2_MISTAKES}
    for name, (changes, _losing) in LAB2_SAMPLES.items():
        answers = dict(LAB2_CORRECT)
        for change in sorted(changes):
            exercise, code = replacements[change]
            answers[exercise] = code
        nbformat.write(_fill(nbformat.from_dict(json.loads(json.dumps(student))), answers),
                       folder / name)
    nbformat.write(student, folder / "dave.ipynb")  # untouched
    (folder / "erin").mkdir()
    copy = _colab_metadata(_fill(nbformat.from_dict(json.loads(json.dumps(student))),
                                 LAB2_CORRECT), name=f"Copy of {LAB2_NOTEBOOK}")
    nbformat.write(copy, folder / "erin" / f"Copy of {LAB2_NOTEBOOK}")
    text = nbformat.writes(_fill(nbformat.from_dict(json.loads(json.dumps(student))),
                                 LAB2_CORRECT))
    (folder / "heidi.ipynb").write_text(text[: len(text) // 2])  # cut short
    return build_expectations_lab2()


def build_all() -> None:
    """Build the samples of every lab: lab1 and lab2 here, the others in samples_<lab>.py."""
    import importlib.util

    builders = [("lab1", build_lab1), ("lab2", build_lab2)]
    for module_path in sorted(HERE.glob("samples_lab*.py")):
        spec = importlib.util.spec_from_file_location(module_path.stem, module_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        builders.append((module_path.stem.removeprefix("samples_"), module.build))
    for lab, build in builders:
        if not (ROOT / "labs" / lab).exists():
            continue
        for sample, outcome in build().items():
            print(lab, sample, sum(v == "kept" for v in outcome.values()), "exercises kept")


if __name__ == "__main__":
    build_all()
