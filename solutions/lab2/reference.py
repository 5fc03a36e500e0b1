"""Reference implementations of lab 2 ("self-attention and multi-head attention").

Instructor side only: never shipped with labs/ or the `labkit` package.

Everything numeric here is float64 NumPy computed from what it is given (for
layers: the inputs and the student's own weights, in the layout of
`keras.layers.MultiHeadAttention`), written independently of the solution
cells in solutions/lab2. ``keras_multi_head_attention`` is the one exception
on purpose: it runs the Keras built-in layer with the student's weights copied
in, so a hidden test can show that ``keras_mha.set_weights(student.get_weights())``
really reproduces the student's layer.

Besides the references it holds the hidden tests' checks of this lab's layers
(``check_mha_case``, ``assert_from_scratch``) and what says that a "from
scratch" layer is not one (``borrowed_attention_classes``,
``borrowed_in_source``). ``describe``, ``tensor`` and ``raised``, which let one
hidden test run under the grader and in the source notebook, come from
autograder.testkernel and are re-exported for the hidden tests.
"""

from __future__ import annotations

import ast
import functools
import math
import re
import symtable

import numpy as np

from autograder.testkernel.layers import describe
from autograder.testkernel.testing import computed_once, raised, tensor

__all__ = [
    "mha_weight_shapes",
    "keras_mha_weight_shapes",
    "mha_parameter_count",
    "self_attention",
    "split_heads",
    "merge_heads",
    "allowed_mask",
    "multi_head_attention",
    "keras_multi_head_attention",
    "borrowed_attention_classes",
    "describe",
    "tensor",
    "raised",
    "mha_random_weights",
    "assert_from_scratch",
    "borrowed_in_source",
    "student_cells",
    "check_mha_case",
]


def _float64(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


# --- weight shapes ---------------------------------------------------------------


def keras_mha_weight_shapes(query_dim, key_input_dim, value_input_dim, num_heads,
                            key_dim, value_dim=None, use_bias=True):
    """Shapes of `keras.layers.MultiHeadAttention(num_heads, key_dim, value_dim,
    use_bias=use_bias)` built on a query of last dimension ``query_dim``, a key
    of ``key_input_dim`` and a value of ``value_input_dim``, in the order of its
    ``weights``: query, key, value and output projections, each kernel followed
    by its bias. The output has the query's last dimension.
    """
    value_dim = key_dim if value_dim is None else value_dim
    heads = int(num_heads)
    kernels_and_biases = [
        ((int(query_dim), heads, int(key_dim)), (heads, int(key_dim))),
        ((int(key_input_dim), heads, int(key_dim)), (heads, int(key_dim))),
        ((int(value_input_dim), heads, int(value_dim)), (heads, int(value_dim))),
        ((heads, int(value_dim), int(query_dim)), (int(query_dim),)),
    ]
    shapes = []
    for kernel, bias in kernels_and_biases:
        shapes.append(kernel)
        if use_bias:
            shapes.append(bias)
    return shapes


def mha_weight_shapes(d_model, num_heads, key_dim, value_dim=None):
    """The 8 weight shapes of Keras's MultiHeadAttention on inputs of size d_model."""
    return keras_mha_weight_shapes(d_model, d_model, d_model, num_heads, key_dim,
                                   value_dim)


def mha_parameter_count(d_model, num_heads, key_dim, value_dim=None):
    """Number of trainable numbers in those weights."""
    return int(sum(math.prod(shape) for shape in
                   mha_weight_shapes(d_model, num_heads, key_dim, value_dim)))


# --- one head ----------------------------------------------------------------------


def _masked_softmax(scores, allowed=None):
    """Softmax over the last axis; False in ``allowed`` gets weight 0.

    A row with no allowed entry gets all zeros (finite; such rows are not
    graded).
    """
    scores = _float64(scores)
    if allowed is not None:
        scores = np.where(np.asarray(allowed, dtype=bool), scores, -np.inf)
    with np.errstate(all="ignore"):
        largest = np.max(scores, axis=-1, keepdims=True)
        largest = np.where(np.isfinite(largest), largest, 0.0)
        exponentials = np.exp(scores - largest)
        total = np.sum(exponentials, axis=-1, keepdims=True)
        return exponentials / np.where(total > 0, total, 1.0)


def self_attention(inputs, weights, attention_mask=None):
    """One head of self-attention with Dense projections.

    Args:
        inputs: `(B, T, d_model)`.
        weights: ``[W_q, b_q, W_k, b_k, W_v, b_v]`` (kernels `(d_model, key_dim)`,
            biases `(key_dim,)`), or ``[W_q, W_k, W_v]`` without biases.
        attention_mask: boolean, broadcastable to `(B, T, T)`; True = may attend.

    Returns:
        ``(output (B, T, key_dim), scores (B, T, T))``.
    """
    x = _float64(inputs)
    weights = [_float64(w) for w in weights]
    if len(weights) == 3:
        weights = [weights[0], 0.0, weights[1], 0.0, weights[2], 0.0]
    W_q, b_q, W_k, b_k, W_v, b_v = weights
    queries = x @ W_q + b_q  # (B, T, key_dim)
    keys = x @ W_k + b_k  # (B, T, key_dim)
    values = x @ W_v + b_v  # (B, T, key_dim)
    key_dim = W_q.shape[-1]
    scores = np.einsum("btd,bsd->bts", queries, keys) / np.sqrt(key_dim)
    allowed = None if attention_mask is None else np.broadcast_to(
        np.asarray(attention_mask, dtype=bool), scores.shape)
    probabilities = _masked_softmax(scores, allowed)  # (B, T, T)
    return np.einsum("bts,bsd->btd", probabilities, values), probabilities


# --- heads ----------------------------------------------------------------------------


def split_heads(x, num_heads):
    """`(B, T, H * depth)` -> `(B, H, T, depth)`: head h holds features
    h * depth ... (h + 1) * depth - 1 of every token."""
    x = np.asarray(x)
    batch, length, features = x.shape
    depth = features // int(num_heads)
    heads = np.empty((batch, int(num_heads), length, depth), dtype=x.dtype)
    for h in range(int(num_heads)):
        heads[:, h] = x[:, :, h * depth:(h + 1) * depth]
    return heads


def merge_heads(x):
    """`(B, H, T, depth)` -> `(B, T, H * depth)`, the inverse of split_heads."""
    x = np.asarray(x)
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


# --- multi-head attention --------------------------------------------------------


def allowed_mask(batch, query_length, key_length, attention_mask=None,
                 use_causal_mask=False):
    """Where a query may attend, `(B, T_q, T_k)` bool: the attention mask AND,
    when asked, the causal mask (query i sees keys j <= i, as Keras does even
    when T_q != T_k)."""
    allowed = np.ones((batch, query_length, key_length), dtype=bool)
    if attention_mask is not None:
        allowed &= np.broadcast_to(np.asarray(attention_mask, dtype=bool), allowed.shape)
    if use_causal_mask:
        rows = np.arange(query_length)[:, None]
        cols = np.arange(key_length)[None, :]
        allowed &= cols <= rows
    return allowed


def multi_head_attention(query, value, weights, key=None, attention_mask=None,
                         use_causal_mask=False):
    """Multi-head attention in float64 from weights in the Keras layout.

    Args:
        query: `(B, T_q, d_q)`; value: `(B, T_k, d_v)`; key: `(B, T_k, d_k)`,
            the value when None.
        weights: the 8 arrays of ``keras.layers.MultiHeadAttention.get_weights()``
            (query kernel `(d_q, H, key_dim)`, query bias `(H, key_dim)`, key
            kernel, key bias, value kernel `(d_v, H, value_dim)`, value bias,
            output kernel `(H, value_dim, d_q)`, output bias `(d_q,)`), or the 4
            kernels when the layer has no biases.
        attention_mask: boolean `(B, T_q, T_k)`, True = may attend.
        use_causal_mask: also hide keys after the query's position.

    Returns:
        ``(output (B, T_q, d_q), scores (B, H, T_q, T_k))``; rows with no
        allowed key get zero weights.
    """
    query, value = _float64(query), _float64(value)
    key = value if key is None else _float64(key)
    weights = [_float64(w) for w in weights]
    if len(weights) == 4:
        W_q, W_k, W_v, W_o = weights
        b_q = np.zeros(W_q.shape[1:])
        b_k = np.zeros(W_k.shape[1:])
        b_v = np.zeros(W_v.shape[1:])
        b_o = np.zeros(W_o.shape[-1:])
    else:
        W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o = weights
    key_dim = W_q.shape[-1]
    queries = np.einsum("btd,dhk->bhtk", query, W_q) + b_q[None, :, None, :]
    keys = np.einsum("bsd,dhk->bhsk", key, W_k) + b_k[None, :, None, :]
    values = np.einsum("bsd,dhv->bhsv", value, W_v) + b_v[None, :, None, :]
    scores = np.einsum("bhtk,bhsk->bhts", queries, keys) / np.sqrt(key_dim)
    allowed = allowed_mask(query.shape[0], query.shape[1], key.shape[1],
                           attention_mask, use_causal_mask)
    probabilities = _masked_softmax(scores, allowed[:, None, :, :])
    context = np.einsum("bhts,bhsv->bthv", probabilities, values)
    output = np.einsum("bthv,hvd->btd", context, W_o) + b_o
    return output, probabilities


@functools.lru_cache(maxsize=64)
def _keras_layer(num_heads, key_dim, value_dim, use_bias, query_dim, value_dim_in,
                 key_dim_in=None, rank=3):
    """A `keras.layers.MultiHeadAttention` built for inputs of ``rank`` axes
    whose last are ``query_dim``, ``value_dim_in`` (and ``key_dim_in``): its
    weights depend on nothing else, so one is built per configuration and kept by the
    test kernel from one submission to the next (each submission's inputs and
    weights are its own: autograder.grader.worker.submission_seed)."""
    import keras

    built = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim,
                                            value_dim=value_dim, use_bias=use_bias)
    ones = (1,) * (rank - 1)
    query = np.zeros(ones + (query_dim,), dtype="float32")
    value = np.zeros(ones + (value_dim_in,), dtype="float32")
    key = {} if key_dim_in is None else {"key": np.zeros(ones + (key_dim_in,), dtype="float32")}
    # (the path with scores: Keras 3.15's JAX backend fails without it when
    # value_dim != key_dim)
    built(query, value, return_attention_scores=True, **key)
    return built


def keras_weight_shapes(num_heads, key_dim, value_dim, use_bias, query_dim, value_dim_in,
                        key_dim_in=None) -> list[tuple[int, ...]]:
    """The shapes of `keras.layers.MultiHeadAttention`'s weights, in its order, for
    inputs whose last axes are ``query_dim``, ``value_dim_in`` (and ``key_dim_in``)."""
    built = _keras_layer(num_heads, key_dim, value_dim, use_bias, query_dim, value_dim_in,
                         key_dim_in)
    return [tuple(int(n) for n in w.shape) for w in built.weights]


@computed_once
def keras_multi_head_attention(weights, query, value, key=None, *, num_heads, key_dim,
                               value_dim=None, use_bias=True, attention_mask=None,
                               use_causal_mask=False):
    """`keras.layers.MultiHeadAttention` with ``weights`` copied in (set_weights).

    Returns ``(output, scores)`` as NumPy arrays (the explicit path of the Keras
    layer, which returns its attention probabilities, at inference). Raises
    whatever ``set_weights`` raises when the shapes do not fit.
    """
    import keras

    query, value = np.asarray(query), np.asarray(value)
    layer = _keras_layer(num_heads, key_dim, value_dim, use_bias, int(query.shape[-1]),
                         int(value.shape[-1]),
                         None if key is None else int(np.asarray(key).shape[-1]),
                         rank=query.ndim)
    arguments = {"key": key} if key is not None else {}
    layer.set_weights([np.asarray(w, dtype="float32") for w in weights])
    if attention_mask is not None:
        arguments["attention_mask"] = np.asarray(attention_mask, dtype=bool)
    # (On the path that returns scores: Keras 3.15's JAX backend fails on the
    # fused path when value_dim != key_dim.)
    output, scores = layer(query, value, return_attention_scores=True, training=False,
                           use_causal_mask=use_causal_mask, **arguments)
    return (np.asarray(keras.ops.convert_to_numpy(output)),
            np.asarray(keras.ops.convert_to_numpy(scores)))


# --- "from scratch" --------------------------------------------------------------------


def borrowed_attention_classes(description: dict) -> list[str]:
    """Classes in a student's layer that make it not "from scratch".

    ``description`` is what ``RemoteObject.describe()`` returns: the class, its
    bases and every nested sublayer (with bases). Any class defined outside the
    student's notebook whose path names attention (Keras's MultiHeadAttention,
    Attention, AdditiveAttention, GroupQueryAttention, keras_hub's cached
    attention, torch's MultiheadAttention...) is borrowed.
    """
    paths = [description.get("class", ""), *description.get("bases", [])]
    for sublayer in description.get("sublayers", []):
        paths += [sublayer.get("class", ""), *sublayer.get("bases", [])]
    return sorted({path for path in paths
                   if not path.startswith("__main__.") and "attention" in path.lower()})


# --- "from scratch", read from the submitted source ---------------------------------------
#
# What the student's kernel says about its objects (class paths, descriptions)
# is the student's data: a notebook can rename Keras's classes or answer the
# grader's `describe` requests itself. The submitted cells are the grader's
# own copy (autograder.kernels.testskernel writes them for the test kernel), so whether an
# answer is built on an attention layer it did not write is read there.

#: A class of attention (keras.layers.MultiHeadAttention, Attention,
#: AdditiveAttention, GroupQueryAttention, keras_hub's CachedMultiHeadAttention,
#: torch.nn.MultiheadAttention...), by its name.
_ATTENTION_CLASS = re.compile(r"^[A-Z]\w*ttention$")
#: Calls that run code the grader cannot read: builtins called by name, and
#: methods (IPython's, importlib's, runpy's) called on anything.
_UNREADABLE_BUILTINS = {"exec", "eval", "compile", "__import__"}
_UNREADABLE_METHODS = {"exec", "__import__", "import_module", "run_cell", "run_line_magic",
                       "run_cell_magic", "run_path", "run_module"}


def student_cells(target) -> list[str]:
    """The sources of the cells that ran in the student's kernel.

    Under the grader (``target`` is a proxy): the submitted cells, from the
    file the grader wrote for this submission (AUTOGRADER_STUDENT_CELLS); the
    verdict suite's fast tier (tests/verdicts/inprocess.py) writes that file
    too, for answers it runs in place. In the source notebook: IPython's input
    history.
    """
    import json
    import os
    from pathlib import Path

    from autograder.kernels.probe import RemoteObject

    if isinstance(target, RemoteObject) or os.environ.get("AUTOGRADER_STUDENT_CELLS"):
        path = os.environ.get("AUTOGRADER_STUDENT_CELLS", "")
        if not path or not Path(path).is_file():
            raise RuntimeError("the grader did not write the submitted cells for the test "
                               "kernel (AUTOGRADER_STUDENT_CELLS); a grader error, not the "
                               "student's")
        return json.loads(Path(path).read_text(encoding="utf-8"))
    from IPython import get_ipython

    shell = get_ipython()
    return [] if shell is None else list(shell.user_ns.get("In", []))


def _statements(cells: list[str]) -> list[ast.stmt]:
    """The top-level statements of every cell that parses, in order. IPython's
    syntax (magics, !commands) is turned into Python first; the body of a
    cell magic (%%time...) is read as Python."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        transform = TransformerManager().transform_cell
    except ImportError:   # the grader's environment has IPython; this is for tools
        def transform(text):
            return text
    statements = []
    for cell in cells:
        candidates = [cell]
        if cell.lstrip().startswith("%%"):
            candidates.insert(0, cell.lstrip().split("\n", 1)[-1] if "\n" in cell else "")
        for candidate in candidates:
            try:
                statements += ast.parse(transform(candidate)).body
                break
            except Exception:  # noqa: BLE001 - not Python (a cell that failed to run)
                continue
    return statements


def _bound_and_read(statement: ast.stmt) -> tuple[set[str], set[str], bool]:
    """The global names ``statement`` binds and reads, and whether it is a
    star import (which may bind any name)."""
    star = isinstance(statement, ast.ImportFrom) and any(a.name == "*" for a in statement.names)
    try:
        table = symtable.symtable(ast.unparse(statement), "<cell>", "exec")
    except Exception:  # noqa: BLE001 - code Python would refuse: every name, to be safe
        names = [node for node in ast.walk(statement) if isinstance(node, ast.Name)]
        bound = {node.id for node in names if not isinstance(node.ctx, ast.Load)} | {
            node.name for node in ast.walk(statement)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        return bound, {node.id for node in names}, star
    bound, read = set(), set()

    def walk(scope, top):
        for symbol in scope.get_symbols():
            name = symbol.get_name()
            if top and symbol.is_local() or symbol.is_declared_global() and symbol.is_assigned():
                bound.add(name)
            if symbol.is_referenced() and symbol.is_global():
                read.add(name)
        for child in scope.get_children():
            walk(child, False)

    walk(table, True)
    return bound, read, star


def _borrowed_in(statement: ast.stmt) -> list[str]:
    """What in ``statement`` reaches an attention class or unreadable code."""
    found = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Attribute) and _ATTENTION_CLASS.match(node.attr):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and (node.module or "") != "__main__":
            found += [f"from {node.module} import {alias.name}" for alias in node.names
                      if _ATTENTION_CLASS.match(alias.name)]
        elif isinstance(node, ast.Call):
            function = node.func
            method = isinstance(function, ast.Attribute)
            name = function.attr if method else getattr(function, "id", "")
            strings = [a.value for a in node.args if isinstance(a, ast.Constant)
                       and isinstance(a.value, str)]
            if name in (_UNREADABLE_METHODS if method else _UNREADABLE_BUILTINS):
                found.append(f"{name}(...) (code the grader cannot read)")
            elif name == "getattr" and any(_ATTENTION_CLASS.match(text) for text in strings):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str) and _ATTENTION_CLASS.match(node.slice.value):
            found.append(ast.unparse(node))
    return found


def borrowed_in_source(cells: list[str], name: str) -> list[str]:
    """How the code that defines ``name`` in ``cells`` uses an attention layer
    it did not write; [] when it does not.

    From every top-level statement that binds ``name``, follow the global
    names it reads (inside its functions and methods too) to the statements
    that bind them, in any cell; report every attention class reached (an
    attribute such as ``keras.layers.MultiHeadAttention``, an import of one,
    ``getattr`` or a subscript with its name as a literal) and any exec, eval
    or magic that runs code the grader cannot read. A ``name`` bound by no
    readable statement is reported too. Code that is not reached (a cell
    comparing the answer with Keras's layer) does not count.
    """
    statements = _statements(cells)
    facts = [_bound_and_read(statement) for statement in statements]
    roots = [i for i, (bound, _, star) in enumerate(facts) if name in bound and not star]
    if not roots:
        return [f"`{name}` is not defined by a statement the grader can read (a class "
                "statement in its answer cell)"]
    binders: dict[str, list[int]] = {}
    stars = []
    for index, (bound, _, star) in enumerate(facts):
        if star:
            stars.append(index)
        for bound_name in bound:
            binders.setdefault(bound_name, []).append(index)
    seen, queue = set(roots), list(roots)
    while queue:
        for read in facts[queue.pop()][1]:
            # a name no statement binds may come from a star import
            more = binders.get(read) or (stars if _ATTENTION_CLASS.match(read) else [])
            for index in more:
                if index not in seen:
                    seen.add(index)
                    queue.append(index)
    found = []
    for index in sorted(seen):
        for item in _borrowed_in(statements[index]):
            if item not in found:
                found.append(item[:120])
        if facts[index][2]:
            found.append(ast.unparse(statements[index])[:120])
    return found


# --- shared by the tests cells of MultiHeadAttention -------------------------------------
#
# The layer's points are split by property (outputs, masks, dropout, config,
# arguments), one tests cell each; these two helpers serve the cells that
# compare values, so that each stays short and grades only its property.


def mha_random_weights(shapes, r) -> list[np.ndarray]:
    """Grader-chosen weights for ``shapes`` (Keras's layout): kernels scaled by
    their fan-in, non-zero biases."""
    kernels = [index for index, shape in enumerate(shapes) if len(shape) == 3]
    weights = []
    for index, shape in enumerate(shapes):
        if len(shape) == 3:
            # the output kernel (H, value_dim, d) sums over H * value_dim numbers
            fan_in = shape[0] * shape[1] if index == kernels[-1] else shape[0]
            weights.append((1.4 * r.normal(size=shape) / np.sqrt(fan_in)).astype("float32"))
        else:
            weights.append((0.5 * r.normal(size=shape)).astype("float32"))
    return weights


def build_quietly(layer, shape) -> None:
    """Call the student's ``layer`` once on zeros of ``shape`` (query and value),
    so that its weights and sublayers exist; an error there is the values
    cell's to report, not the config or validation cell's."""
    x = np.zeros(shape, dtype="float32")
    try:
        layer(x, x)
    except Exception:  # noqa: BLE001 - a wrong computation is graded elsewhere
        pass


def assert_from_scratch(layer, name: str = "MultiHeadAttention",
                        how: str = "add_weight or EinsumDense, keras.ops") -> None:
    """Fail, saying why, when the student's ``name`` (class or layer) is built
    on an attention layer it did not write. Every tests cell of the exercise
    starts with it: a wrapper of Keras's layer earns none of them.

    What decides is the submitted source (``borrowed_in_source``), which the
    grader holds; the description the student's kernel gives of the layer is
    only an early hint (a notebook can forge it).
    """
    from autograder.testkernel.testing import assert_true

    borrowed = borrowed_attention_classes(describe(layer))
    assert_true(not borrowed,
                f"{name} is built on {', '.join(borrowed)}; this exercise asks for attention "
                f"written from scratch ({how}), without Keras's attention layers.")
    found = _borrowed_in_cells(tuple(student_cells(layer)), name)
    assert_true(not found,
                f"{name} uses {'; '.join(found)} (read in your notebook's cells); this "
                f"exercise asks for attention written from scratch ({how}): remove Keras's "
                f"attention layers from the code of {name} and of everything it calls "
                "(comparing with Keras's layer in a cell of its own is fine).")


@functools.lru_cache(maxsize=8)
def _borrowed_in_cells(cells: tuple[str, ...], name: str) -> tuple[str, ...]:
    """``borrowed_in_source``, read once per submission and name (each tests
    cell asks several times)."""
    return tuple(borrowed_in_source(list(cells), name))


def _check_against_itself(layer, query, value, key, allowed, output, scores, what) -> None:
    """Each query with a visible key (b, i): the masked call's output and weights
    are those of ``layer`` on the same queries with only the keys query i may see
    (``allowed[b, i]``), without a mask, at row i."""
    from autograder.testkernel.testing import as_array, assert_close, assert_true

    key = value if key is None else key
    batch, query_length = allowed.shape[:2]
    for b in range(batch):
        for i in range(query_length):
            seen = allowed[b, i]
            if not seen.any():
                continue  # no visible key: not graded (the finite check holds)
            alone = layer(query[b:b + 1], value[b:b + 1, seen], key=key[b:b + 1, seen],
                          return_attention_scores=True)
            assert_true(isinstance(alone, (tuple, list)) and len(alone) == 2,
                        f"{what}: returned {type(alone).__name__}, expected a tuple "
                        "(output, scores) with return_attention_scores=True.")
            where = (f"{what}: query {i} of sequence {b}, against the same layer on the same "
                     f"queries with only its {int(seen.sum())} visible keys and no mask")
            alone_output = as_array(alone[0], where).astype(np.float64)
            alone_scores = as_array(alone[1], where).astype(np.float64)
            assert_close(scores[b, :, i][:, seen], alone_scores[0, :, i],
                         f"{where}: its weights over those keys")
            assert_close(output[b, i], alone_output[0, i], f"{where}: its output")


def check_mha_case(MultiHeadAttention, r, num_heads, key_dim, value_dim, use_bias,
                   query_shape, value_shape, key_shape=None, mask="none", causal=False,
                   send_tensors=False, first=False, own=False):
    """Build the student's layer on grader-chosen inputs, give it grader-chosen
    weights and compare its output and scores with float64 NumPy and with
    `keras.layers.MultiHeadAttention` holding the same weights.

    ``mask``: "none", "random" (with a fully masked row) or "padding" (sequence b
    has T_k - b real keys). Returns (layer, query, value, key, weights).

    ``own`` (the masks cell): the masks judged against the layer itself, not the
    references: whatever its weight shapes, each query's output and weights
    are those the layer gives on the same queries with only that query's
    visible keys, unmasked. What the layer computes is the first cell's.
    """
    from autograder.testkernel.testing import as_array, assert_close, assert_finite, assert_shape, \
        assert_true

    query = r.normal(size=query_shape).astype("float32")
    self_attention = value_shape is None
    value = query if self_attention else r.normal(size=value_shape).astype("float32")
    key = None if key_shape is None else r.normal(size=key_shape).astype("float32")
    batch, query_length, key_length = query.shape[0], query.shape[1], value.shape[1]
    what = (f"MultiHeadAttention(num_heads={num_heads}, key_dim={key_dim}, "
            f"value_dim={value_dim}, use_bias={use_bias})")
    layer = MultiHeadAttention(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim,
                               use_bias=use_bias)
    if first:
        assert_true(len(layer.weights) == 0,
                    f"{what} has weights before its first call; create them in build.")
    inputs = f"query {query.shape}" + ("" if self_attention else f", value {value.shape}") \
        + ("" if key is None else f", key {key.shape}")
    what += f" on {inputs}"
    key_argument = {} if key is None else {"key": key}
    output = layer(query, value, **key_argument)
    assert_true(not isinstance(output, (tuple, list)),
                f"{what}: layer(query, value) returned a tuple; return only the output "
                "unless return_attention_scores=True.")
    assert_shape(output, query.shape, f"{what}: output (the query's shape)")
    assert_from_scratch(layer)

    # Weight shapes and order, against Keras's own layer on inputs of the same sizes.
    keras_shapes = keras_weight_shapes(num_heads, key_dim, value_dim, use_bias, query.shape[-1],
                                       value.shape[-1], None if key is None else key.shape[-1])
    current = [as_array(w, f"{what}: get_weights()") for w in layer.get_weights()]
    shapes = [tuple(w.shape) for w in current]
    assert_true(own or shapes == keras_shapes,
                f"{what}: get_weights() has shapes {shapes}; Keras's layer has "
                f"{keras_shapes} (query, key, value and output kernels, each followed "
                "by its bias when use_bias=True).")
    weights = mha_random_weights(shapes, r)
    layer.set_weights(weights)
    round_trip = layer.get_weights()
    assert_true(all(np.array_equal(a, b) for a, b in zip(round_trip, weights)),
                f"{what}: get_weights() after set_weights() gives other numbers.")

    # Values, against float64 NumPy and against Keras with the same weights.
    attention_mask = None
    mask_text = mask
    if mask == "random":
        attention_mask = r.random(size=(batch, query_length, key_length)) < 0.6
        attention_mask[..., 0] = True
        attention_mask[-1, min(1, query_length - 1), :] = False  # a fully masked row
        mask_text = f"random {attention_mask.shape} with a fully masked row"
    elif mask == "padding":  # sequence b has key_length - b real keys
        attention_mask = np.ones((batch, query_length, key_length), dtype=bool)
        for b in range(batch):
            attention_mask[b, :, max(1, key_length - b):] = False
        mask_text = f"padding {attention_mask.shape}"
    arguments = {}
    if attention_mask is not None:
        arguments["attention_mask"] = attention_mask
    if causal:
        arguments["use_causal_mask"] = True
    if attention_mask is not None or causal:
        what += f", attention_mask={mask_text}" + (", use_causal_mask=True" if causal else "")
    if own:
        expected_output = np.zeros(query.shape)
        expected_scores = np.zeros((batch, num_heads, query_length, key_length))
    else:
        expected_output, expected_scores = multi_head_attention(
            query, value, weights, key=key, attention_mask=attention_mask,
            use_causal_mask=causal)
    send = (lambda a: tensor(a, like=layer)) if send_tensors else (lambda a: a)
    if key is not None:
        arguments["key"] = send(key)
    result = layer(send(query), send(value), return_attention_scores=True, **arguments)
    assert_true(isinstance(result, (tuple, list)) and len(result) == 2,
                f"{what}: returned {type(result).__name__}, expected a tuple "
                "(output, scores) with return_attention_scores=True.")
    output, scores = result
    scores = assert_shape(scores, expected_scores.shape, f"{what}: scores (B, num_heads, T_q, T_k)")
    output = assert_shape(output, expected_output.shape, f"{what}: output")
    if attention_mask is not None or causal:
        finite = np.all(np.isfinite(scores.astype(np.float64))) and np.all(
            np.isfinite(output.astype(np.float64)))
        assert_true(bool(finite),
                    f"{what}: NaN or inf in the scores or the output; with -inf every "
                    "score of a query whose keys are all hidden is -inf and the softmax "
                    "gives 0/0: mask with a large negative number instead, "
                    "large_negative(scores.dtype).")
    scores = assert_finite(scores, f"{what}: scores").astype(np.float64)
    output = assert_finite(output, f"{what}: output").astype(np.float64)
    allowed = allowed_mask(batch, query_length, key_length, attention_mask, causal)
    live = allowed.any(axis=-1)  # (B, T_q); rows with no visible key are not graded
    live_scores = scores.transpose(0, 2, 1, 3)[live]  # (rows, H, T_k)
    expected_live = expected_scores.transpose(0, 2, 1, 3)[live]
    assert_true(np.allclose(live_scores.sum(axis=-1), 1.0, atol=1e-4),
                f"{what}: a query's weights do not sum to 1 over the keys; take the "
                "softmax over the last axis (the keys).")
    hidden = ~np.broadcast_to(allowed[:, None], scores.shape)
    assert_true(np.all(np.abs(scores[hidden & live[:, None, :, None]]) <= 1e-6),
                f"{what}: keys hidden by the mask must get weight 0 (attention_mask "
                "False, or j > i with use_causal_mask=True).")
    if own:
        _check_against_itself(layer, query, value, key, allowed, output, scores, what)
        return layer, query, value, key, weights
    if not np.allclose(live_scores, expected_live, rtol=1e-4, atol=1e-5):
        d_model = query.shape[-1]
        for divisor, hint in [
                (1.0, "the scores are not scaled; divide by sqrt(key_dim)"),
                (key_dim, "the scores are divided by key_dim; divide by sqrt(key_dim)"),
                (np.sqrt(d_model), "the scores are divided by sqrt(d_model), the "
                 "query's size; each head divides by sqrt(key_dim)"),
                (np.sqrt(num_heads * key_dim), "the scores are divided by "
                 "sqrt(num_heads * key_dim); each head divides by sqrt(key_dim)")]:
            if np.isclose(divisor, np.sqrt(key_dim)):
                continue
            scaled = list(weights)  # scaling the queries scales the scores
            for index in ((0, 1) if use_bias else (0,)):
                scaled[index] = weights[index] * (np.sqrt(key_dim) / divisor)
            guess = multi_head_attention(query, value, scaled, key=key,
                                         attention_mask=attention_mask,
                                         use_causal_mask=causal)[1]
            assert_true(not np.allclose(live_scores, guess.transpose(0, 2, 1, 3)[live],
                                        rtol=1e-4, atol=1e-5), f"{what}: {hint}.")
    assert_close(live_scores, expected_live, f"{what}: scores")
    assert_close(output[live], expected_output[live], f"{what}: output")
    keras_output, keras_scores = keras_multi_head_attention(
        weights, query, value, key, num_heads=num_heads, key_dim=key_dim,
        value_dim=value_dim, use_bias=use_bias, attention_mask=attention_mask,
        use_causal_mask=causal)
    # Two float32 computations: twice the policy's float32-vs-float64 tolerance.
    assert_close(live_scores, keras_scores.transpose(0, 2, 1, 3)[live],
                 f"{what}: scores against keras.layers.MultiHeadAttention with your "
                 "weights", rtol=2e-4, atol=2e-5)
    assert_close(output[live], keras_output[live],
                 f"{what}: output against keras.layers.MultiHeadAttention with your "
                 "weights", rtol=2e-4, atol=2e-5)
    return layer, query, value, key, weights
