"""A generated class of lab 1 notebooks, written independently, with planted copies.

What autograder.term.similarity is calibrated on (tests/term/test_term_similarity.py,
benchmarks/similarity_calibration.py). Each author writes the six lab 1
answers (dot_scores, softmax, attention_pool, bilinear_scores,
additive_scores, scaled_dot_product_attention) in a style of their own, drawn
from seeded random choices, the way a class does:

- an approach per exercise (einsum, broadcasting and a sum, matmul, a loop
  over the keys, keras.ops; for softmax a shift by the maximum, the
  log-sum-exp, np.moveaxis, ops.softmax; for additive_scores a concatenation
  or W1 split in two; for the masks ops.where, an additive -1e9 ...), and
  details within it (einsum letters, keepdims or expand_dims, intermediate
  variables or one expression, np.asarray or not, a guard for rows of -inf,
  a helper function beside the answer);
- how closely they follow the hints of the checks and the lecture (the
  hinted choice is taken with a probability scaled by the author's
  conformity: some write nearly what the hints say, others their own way);
- habits: variable names (``scores``, ``logits``, ``s``, ``sims`` ...),
  comments (none, at the end of lines, above them), the order of
  independent statements;
- scratch cells of their own (new, untagged: a print of a small example),
  sometimes an edited demo cell, now and then an exercise left unanswered
  (and :data:`NEARLY_BLANK` authors who answer one or two).

So independent notebooks share what a class shares, idioms (``e = np.exp(x -
m)``, ``weights = softmax(dot_scores(query, keys), axis=-1)``) and whole
short answers written the same way, as a guided lab's class does: the
comparison before issue 31 listed more than a third of such a class's
pairs. Then copiers take an author's answers (never a nearly blank one) and
hide the copy (the kinds of :data:`COPY_KINDS`, and :data:`MORE_KINDS`):

- ``verbatim``: the answers as they are;
- ``renamed``: every variable renamed, the comments rewritten;
- ``reordered``: independent statements in another order, helper functions
  moved;
- ``moved``: the answer cells left as released (the stub) and the six
  functions, in another order, in one new untagged cell at the end (every
  cell runs when graded, so the last definition wins);
- ``respaced``: comments and white space changed;
- ``disguised``: renamed, reordered and moved, one new cell per function
  after the stub, which is left as ``pass``;
- ``partial``: half the exercises copied as they are, the others the
  copier's own.

A copier's scratch cells are their own. Nothing is executed: the notebooks
are the released blank notebook with cells filled or added (under 0.1 s
for a class of 37). Every source is valid Python (a test parses them all).
"""

from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path

import nbformat

from autograder.labs import LABS

LAB = LABS["lab1"]
PLACEHOLDER = "    # YOUR CODE HERE\n    raise NotImplementedError()"

#: The ways a planted copy hides, one copier each (see the module's docstring).
COPY_KINDS = ("verbatim", "renamed", "reordered", "moved", "respaced", "disguised")
#: Copies a calibration may add: ``partial``, half the exercises copied as
#: they are into a notebook otherwise the copier's own.
MORE_KINDS = ("partial",)

#: concept -> the names a student may give it (drawn once per student).
NAMES = {
    "q": ["q", "qry", "query_arr", "qv", "q_vec", "qq", "the_query"],
    "k": ["k", "ks", "key_arr", "kk", "K", "key_mat", "the_keys"],
    "v": ["v", "vals", "value_arr", "vv", "V", "vs", "the_values"],
    "W": ["W_", "w_mat", "mat", "Wm", "weight"],
    "scores": ["scores", "s", "logits", "sims", "dots", "raw_scores", "score", "similarities",
               "energies", "att_scores", "dot"],
    "weights": ["weights", "w", "probs", "alpha", "attn", "attention_weights", "a", "p",
                "alphas", "coeffs"],
    "context": ["context", "ctx", "c", "pooled", "out", "result", "summary", "weighted_sum",
                "mixed"],
    "x": ["arr", "z", "xs", "data", "inp", "x_arr", "xa"],
    "max": ["m", "x_max", "mx", "biggest", "row_max", "max_val", "top", "peak", "maxes"],
    "exp": ["e", "exps", "ex", "exp_x", "numerator", "num", "exponentials", "exped", "ez"],
    "total": ["total", "denom", "denominator", "norm", "sum_e", "partition", "tot", "summed"],
    "shifted": ["shifted", "x_shift", "stable", "centered", "diff", "safe", "xs_shift"],
    "lse": ["lse", "log_total", "log_z", "logsum", "log_norm"],
    "moved": ["moved", "last", "xt", "swapped", "x_last"],
    "projected": ["projected", "qW", "q_w", "transformed", "proj", "left", "wq", "qm"],
    "projected_keys": ["projected_keys", "kW", "k_w", "keys_w", "right", "kt", "kproj"],
    "repeated": ["repeated", "q_rep", "q_b", "q_tiled", "q_exp", "qs", "broadcast_q", "q_all"],
    "stacked": ["stacked", "concat", "cat", "pairs", "joined", "qk", "combined", "inputs"],
    "hidden": ["hidden", "h", "act", "activations", "hid", "tanh_out", "features", "z_h"],
    "d_q": ["d_q", "dq", "qdim", "q_size", "nq"],
    "W_q": ["W_q", "Wq", "w_top", "W1q", "wq1"],
    "W_k": ["W_k", "Wk", "w_bottom", "W1k", "wk1"],
    "h_q": ["h_q", "from_query", "hq", "q_part", "q_h"],
    "h_k": ["h_k", "from_keys", "hk", "k_part", "k_h"],
    "d_k": ["d_k", "dk", "depth", "dim", "key_dim", "size", "d"],
    "scale": ["scale", "factor", "scaling", "inv_sqrt", "norm_factor"],
    "output": ["output", "out", "result", "attended", "res", "y", "outputs"],
    "allowed": ["allowed", "visible", "keep", "bool_mask", "mask_b", "can_see"],
    "i": ["i", "j", "idx", "t", "n_i"],
    "n": ["n", "n_keys", "num_keys", "count", "N", "nk"],
    "list": ["out", "cols", "collected", "results", "parts", "buf", "acc"],
    "pair": ["pair", "joint", "qk_i", "both", "row", "inp_i"],
    "helper": ["_mask_scores", "apply_mask", "masked", "hide_masked", "_masked_fill"],
    "helper_scale": ["_scale", "scale_scores", "scaled", "_by_sqrt_dk", "divide_by_sqrt"],
    "mask": ["mask", "m", "msk", "visible", "allowed_mask", "keep"],
}

#: Parameters of the six functions (never picked as a local name).
PARAMETERS = {"query", "keys", "values", "key", "value", "mask", "x", "axis", "W", "W1", "w2"}

NOTES = {
    "convert": ["as arrays", "numpy arrays", "accept lists too", "make sure these are arrays",
                "convert first"],
    "scores": ["(..., n)", "one score per key", "dot products", "q . k_i for each i",
               "shape (..., n)"],
    "max": ["for stability", "subtract the max", "avoid overflow", "max along axis",
            "largest value per row"],
    "guard": ["rows of -inf", "all -inf row", "avoid nan", "keep it finite"],
    "exp": ["exponentials", "now safe", "exp", "no overflow now"],
    "normalise": ["normalise", "sum to 1", "divide by the sum", "normalize"],
    "weights": ["attention weights", "softmax over keys", "(..., n)", "weights sum to 1"],
    "context": ["weighted sum of the values", "(..., d_v)", "context vector", "sum_i w_i v_i"],
    "project": ["q^T W", "(..., d_k)", "project the query", "apply W"],
    "hidden": ["(..., n, h)", "hidden layer", "tanh", "one hidden layer"],
    "concat": ["[q; k_i]", "(..., n, d_q + d_k)", "stack query and key", "concatenate"],
    "repeat": ["one copy per key", "(..., n, d_q)", "broadcast the query", "repeat q"],
    "scale": ["divide by sqrt(d_k)", "scaling", "scale", "keep the variance down"],
    "mask": ["masked keys get a huge negative", "apply the mask", "hide masked keys", "mask"],
    "output": ["(..., T_q, d_v)", "weighted values", "output", "weights @ V"],
    "loop": ["one key at a time", "loop over the keys", "slow but clear", "for each key"],
}


@dataclass(frozen=True)
class Style:
    """What one author's answers are made of; a copier changes one part.

    Attributes:
        choices: seed of the approaches and details (the code's structure).
        names: seed of the variable names.
        order: seed of the order of independent statements.
        flip: every group of independent statements in the opposite order.
        comments: seed of the comments.
        respace: white space rewritten (``x=a*b`` for ``x = a * b``) and
            blank lines added.
    """

    choices: int
    names: int
    order: int
    comments: int
    flip: bool = False
    respace: bool = False


class Writer:
    """Writes one author's answer bodies (see :func:`answers`)."""

    def __init__(self, style: Style):
        self.style = style
        self.rng = random.Random(f"choices:{style.choices}")
        self._names_rng = random.Random(f"names:{style.names}")
        self._order_rng = random.Random(f"order:{style.order}")
        self._comments_rng = random.Random(f"comments:{style.comments}")
        self.comments = self._comments_rng.choice(["none", "none", "end", "end", "above"])
        self.names: dict[str, str] = {}
        # How closely the author follows the hints: some write what they say, others not.
        self.conformity = self.pick(1.6, 1.3, 1.0, 0.6)
        self.helpers: dict[str, list[str]] = {}  # exercise -> helper functions
        self.convert_habit = self.pick("none", "none", "rebind", "new", "tuple")
        self.array = self.pick("np.asarray({})", "np.asarray({})", "np.array({})",
                               "np.asarray({}, dtype=float)", "np.asarray({}, dtype=np.float64)")
        self.lines: list[str] = []
        self.used: set[str] = set()

    # -- drawing -----------------------------------------------------------

    def pick(self, *options):
        return options[self.rng.randrange(len(options))]

    def often(self, p: float, hinted, *others):
        """``hinted`` (what the check's hint or the lecture suggests) with
        probability ``p``, else any option: a class converges on the hints."""
        return hinted if self.rng.random() < min(0.95, p * self.conformity) \
            else self.pick(hinted, *others)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def name(self, concept: str) -> str:
        """The student's name for ``concept``, distinct within the function."""
        pool = NAMES[concept]
        if concept not in self.names:
            self.names[concept] = self._names_rng.choice(pool)
        chosen = self.names[concept]
        if chosen in self.used:
            chosen = next((n for n in pool if n not in self.used), chosen + "2")
        self.used.add(chosen)
        return chosen

    def local(self, concept: str) -> str:
        """A name for ``concept`` in a helper function of the author's."""
        return self._names_rng.choice(NAMES[concept])

    def helper(self, exercise: str, lines: list[str]) -> None:
        """A helper function written beside ``exercise``'s answer."""
        self.helpers.setdefault(exercise, []).append("\n".join(lines))

    def note(self, topic: str) -> str:
        return self._comments_rng.choice(NOTES[topic])

    # -- writing -----------------------------------------------------------

    def start(self) -> None:
        self.lines, self.used = [], set(PARAMETERS) | {"np", "ops", "keras", "softmax"}

    def statement(self, code: str, topic: str = "") -> list[str]:
        lines = code.split("\n")
        if topic and self.comments == "end" and self._comments_rng.random() < 0.6:
            lines[0] += f"  # {self.note(topic)}"
        elif topic and self.comments == "above" and self._comments_rng.random() < 0.5:
            lines.insert(0, f"# {self.note(topic)}")
        return lines

    def add(self, code: str, topic: str = "") -> None:
        self.lines += self.statement(code, topic)

    def any_order(self, *statements: tuple[str, str] | None) -> None:
        """Statements that do not depend on one another, in the author's order."""
        kept = [s for s in statements if s]
        self._order_rng.shuffle(kept)
        if self.style.flip:
            kept.reverse()
        for code, topic in kept:
            self.add(code, topic)

    def convert(self, *params: tuple[str, str], to: str = "") -> list[str]:
        """Names for ``params`` ((parameter, concept)), converted the author's way."""
        habit = self.convert_habit if self.chance(0.7) else self.pick("none", "rebind", "new")
        wrap = to or self.array
        if habit == "none":
            return [param for param, _ in params]
        if habit == "tuple" and len(params) > 1:
            names = [param for param, _ in params]
            self.add(f"{', '.join(names)} = {', '.join(wrap.format(n) for n in names)}",
                     "convert")
            return names
        names = [param if habit in ("rebind", "tuple") else self.name(concept)
                 for param, concept in params]
        self.any_order(*[(f"{n} = {wrap.format(param)}", "convert")
                         for n, (param, _) in zip(names, params)])
        return names

    def body(self) -> str:
        lines = self.lines
        if self.style.respace:
            lines = [_respace(line) for line in lines]
            lines = [part for line in lines
                     for part in ([line, ""] if self._comments_rng.random() < 0.3 else [line])]
        return "\n".join(("    " + line) if line else "" for line in lines).rstrip()


_STRING = re.compile(r"(\"[^\"]*\"|'[^']*')")


def _respace(line: str) -> str:
    """``line`` with other white space (outside strings) and no end-of-line comment."""
    indent, out = re.match(r"\s*", line).group(0), []
    for index, part in enumerate(_STRING.split(line)):
        if index % 2 == 0:
            comment = "#" in part
            part = part.split("#", 1)[0]
            part = re.sub(r"\s*(==|!=|<=|>=|[=*/+@<>-])\s*", r"\1", part)
            part = re.sub(r",\s*", ",", part)
            out.append(part)
            if comment:
                break
        else:
            out.append(part)
    return indent + "".join(out).strip()


# --------------------------------------------------------------------------
# The six answers
# --------------------------------------------------------------------------


def _dot_scores(w: Writer) -> None:
    q, k = w.convert(("query", "q"), ("keys", "k"))
    kind = w.often(0.5, "broadcast", "einsum", "matmul", "loop", "ops")
    if kind == "loop":
        s, i = w.name("scores"), w.name("i")
        if w.chance(0.5):
            w.add(f"{s} = np.zeros({k}.shape[:-1])")
            w.add(f"for {i} in range({k}.shape[-2]):\n"
                  f"    {s}[..., {i}] = np.sum({q} * {k}[..., {i}, :], axis=-1)", "loop")
            w.add(f"return {s}")
        else:
            w.add(f"{s} = []")
            w.add(f"for {i} in range({k}.shape[-2]):\n"
                  f"    {s}.append((np.asarray({q}) * np.asarray({k})[..., {i}, :]).sum(-1))",
                  "loop")
            w.add(f"return np.stack({s}, axis=-1)")
        return
    if kind == "einsum":
        sig = w.pick("...d,...nd->...n", "...i,...ji->...j", "...k,...nk->...n",
                     "...d,...kd->...k", "...j,...ij->...i")
        expr = f'np.einsum("{sig}", {q}, {k})'
    elif kind == "broadcast":
        expr = w.often(0.6, f"np.sum({q}[..., None, :] * {k}, axis=-1)",
                      f"({k} * {q}[..., np.newaxis, :]).sum(axis=-1)",
                      f"np.sum(np.expand_dims({q}, -2) * {k}, axis=-1)",
                      f"({q}[..., None, :] * {k}).sum(-1)",
                      f"np.sum({k} * np.expand_dims({q}, axis=-2), axis=-1)")
    elif kind == "matmul":
        expr = w.pick(f"({k} @ {q}[..., None])[..., 0]",
                      f"np.squeeze({k} @ {q}[..., :, None], axis=-1)",
                      f"np.matmul({k}, np.expand_dims({q}, -1))[..., 0]",
                      f"({q}[..., None, :] @ np.swapaxes({k}, -1, -2))[..., 0, :]")
    else:
        expr = w.pick(f"ops.sum(ops.expand_dims({q}, -2) * {k}, axis=-1)",
                      f'ops.einsum("...d,...nd->...n", {q}, {k})',
                      f"ops.squeeze(ops.matmul({k}, ops.expand_dims({q}, -1)), -1)")
    if w.chance(0.5):
        s = w.name("scores")
        w.add(f"{s} = {expr}", "scores")
        w.add(f"return {s}")
    else:
        w.add(f"return {expr}", "scores")


def _softmax(w: Writer) -> None:
    kind = w.often(0.65, "shift", "logsumexp", "ops", "moveaxis", "ops_manual")
    if kind == "ops":
        w.add(w.pick("return ops.softmax(x, axis=axis)",
                     "return ops.softmax(ops.convert_to_tensor(x), axis=axis)",
                     "return keras.activations.softmax(ops.convert_to_tensor(x), axis=axis)"))
        return
    if kind == "ops_manual":
        x = w.convert(("x", "x"), to="ops.convert_to_tensor({})")[0]
        m, e = w.name("max"), w.name("exp")
        w.add(f"{m} = ops.max({x}, axis=axis, keepdims=True)", "max")
        w.add(f"{e} = ops.exp({x} - {m})", "exp")
        w.add(f"return {e} / ops.sum({e}, axis=axis, keepdims=True)", "normalise")
        return
    x = w.convert(("x", "x"))[0]
    if kind == "moveaxis":
        moved, e = w.name("moved"), w.name("exp")
        w.add(f"{moved} = np.moveaxis({x}, axis, -1)")
        w.add(f"{e} = np.exp({moved} - {moved}.max(axis=-1, keepdims=True))", "exp")
        w.add(f"return np.moveaxis({e} / {e}.sum(axis=-1, keepdims=True), -1, axis)",
              "normalise")
        return
    m = w.name("max")
    w.add(f"{m} = " + w.often(0.6, f"np.max({x}, axis=axis, keepdims=True)",
                             f"{x}.max(axis=axis, keepdims=True)",
                             f"np.amax({x}, axis=axis, keepdims=True)",
                             f"np.expand_dims(np.max({x}, axis=axis), axis)",
                             f"np.max({x}, axis, keepdims=True)"), "max")
    guard = w.often(0.7, None, "where", "index")
    if guard == "where":
        w.add(f"{m} = np.where(np.isfinite({m}), {m}, 0.0)", "guard")
    elif guard == "index":
        w.add(f"{m}[~np.isfinite({m})] = 0", "guard")
    if kind == "logsumexp":
        lse = w.name("lse")
        w.add(f"{lse} = {m} + np.log(np.sum(np.exp({x} - {m}), axis=axis, keepdims=True))")
        w.add(f"return np.exp({x} - {lse})", "normalise")
        return
    inner = f"{x} - {m}"
    if w.chance(0.35):
        shifted = w.name("shifted")
        w.add(f"{shifted} = {x} - {m}", "max")
        inner = shifted
    e = w.name("exp")
    w.add(f"{e} = np.exp({inner})", "exp")
    total = w.often(0.6, f"np.sum({e}, axis=axis, keepdims=True)",
                    f"{e}.sum(axis=axis, keepdims=True)")
    if w.chance(0.4):
        t = w.name("total")
        w.add(f"{t} = {total}")
        w.add(f"return {e} / {t}", "normalise")
    else:
        w.add(f"return {e} / {total}", "normalise")


def _attention_pool(w: Writer) -> None:
    s, wt, c = w.name("scores"), w.name("weights"), w.name("context")
    call = w.often(0.6, "softmax({}, axis=-1)", "softmax({})", "softmax({}, -1)")
    kind = w.often(0.5, "nested", "helper", "einsum", "broadcast")
    v = "values"
    convert_values = w.chance(0.5)
    if convert_values:
        v = w.name("v") if w.chance(0.5) else "values"
    values_line = (f"{v} = {w.array.format('values')}", "convert") if convert_values else None
    if kind == "nested":
        w.any_order((f"{wt} = " + call.format("dot_scores(query, keys)"), "weights"),
                    values_line)
    else:
        expr = {"helper": "dot_scores(query, keys)",
                "einsum": 'np.einsum("...d,...nd->...n", query, keys)',
                "broadcast": "np.sum(query[..., None, :] * np.asarray(keys), axis=-1)"}[kind]
        w.any_order((f"{s} = {expr}", "scores"), values_line)
        w.add(f"{wt} = " + call.format(s), "weights")
    if not convert_values and w.chance(0.5):
        v = "np.asarray(values)"
    if w.chance(0.15):
        i = w.name("i")
        vv = v if not v.startswith("np.") else "values"
        w.add(f"{c} = np.zeros(np.shape({vv})[:-2] + np.shape({vv})[-1:])")
        w.add(f"for {i} in range(np.shape({vv})[-2]):\n"
              f"    {c} = {c} + {wt}[..., {i}, None] * {vv}[..., {i}, :]", "loop")
    else:
        letters = w.pick("...n,...nv->...v", "...k,...kd->...d", "...j,...jd->...d")
        expr = w.often(0.5, f"np.sum({wt}[..., None] * {v}, axis=-2)",
                      f'np.einsum("{letters}", {wt}, {v})',
                      f"({wt}[..., None, :] @ {v})[..., 0, :]",
                      f"np.squeeze(np.expand_dims({wt}, -2) @ {v}, axis=-2)",
                      f"np.matmul({wt}[..., np.newaxis, :], {v}).squeeze(-2)",
                      f"(np.expand_dims({wt}, -1) * {v}).sum(axis=-2)")
        if w.chance(0.25):
            w.add(f"return {expr}, {wt}", "context")
            return
        w.add(f"{c} = {expr}", "context")
    w.add(w.pick(f"return {c}, {wt}", f"return ({c}, {wt})"))


def _bilinear_scores(w: Writer) -> None:
    q, k, W = w.convert(("query", "q"), ("keys", "k"), ("W", "W"))
    kind = w.often(0.55, "project_query", "project_keys", "einsum", "chain", "loop")
    if kind == "einsum":
        sig = w.pick("...i,ij,...nj->...n", "...a,ab,...nb->...n", "...q,qk,...nk->...n",
                     "...d,de,...ne->...n")
        w.add(f'return np.einsum("{sig}", {q}, {W}, {k})', "scores")
        return
    if kind == "chain":
        w.add("return " + w.pick(
            f"np.squeeze(({q} @ {W})[..., None, :] @ np.swapaxes({k}, -1, -2), axis=-2)",
            f"({k} @ ({q} @ {W})[..., :, None])[..., 0]",
            f"np.matmul({k}, np.matmul({q}, {W})[..., None])[..., 0]"), "scores")
        return
    if kind == "loop":
        out, i = w.name("list"), w.name("i")
        p = w.name("projected")
        w.add(f"{p} = {q} @ {W}", "project")
        w.add(f"{out} = []")
        w.add(f"for {i} in range({k}.shape[-2]):\n"
              f"    {out}.append(np.sum({p} * {k}[..., {i}, :], axis=-1))", "loop")
        w.add(f"return np.stack({out}, axis=-1)")
        return
    if kind == "project_query":
        p = w.name("projected")
        w.add(f"{p} = " + w.often(0.6, f"{q} @ {W}", f"np.matmul({q}, {W})", f"np.dot({q}, {W})",
                                 f'np.einsum("...i,ij->...j", {q}, {W})'), "project")
        w.add("return " + w.often(0.3, f"dot_scores({p}, {k})",
                                 f"np.sum({p}[..., None, :] * {k}, axis=-1)",
                                 f'np.einsum("...j,...nj->...n", {p}, {k})',
                                 f"({k} @ {p}[..., None])[..., 0]"), "scores")
        return
    pk = w.name("projected_keys")
    w.add(f"{pk} = " + w.pick(f"{k} @ {W}.T", f"np.matmul({k}, np.transpose({W}))",
                              f'np.einsum("...nj,ij->...ni", {k}, {W})',
                              f"{k} @ np.swapaxes({W}, 0, 1)"), "project")
    w.add("return " + w.pick(f"dot_scores({q}, {pk})",
                             f"np.sum({q}[..., None, :] * {pk}, axis=-1)"), "scores")


def _additive_scores(w: Writer) -> None:
    q, k = w.convert(("query", "q"), ("keys", "k"))
    kind = w.often(0.6, "concat", "split", "loop")
    if kind == "loop":
        out, i, pair = w.name("list"), w.name("i"), w.name("pair")
        w.add(f"{out} = []")
        step = w.pick(f"{out}.append(np.tanh({pair} @ W1) @ w2)",
                      f"{out}.append(np.dot(np.tanh(np.dot({pair}, W1)), w2))")
        w.add(f"for {i} in range({k}.shape[-2]):\n"
              f"    {pair} = np.concatenate([{q}, {k}[..., {i}, :]], axis=-1)\n"
              f"    {step}", "loop")
        w.add(f"return np.stack({out}, axis=-1)")
        return
    h = w.name("hidden")
    if kind == "split":
        dq, wq, wk = w.name("d_q"), w.name("W_q"), w.name("W_k")
        w.add(f"{dq} = {q}.shape[-1]")
        if w.chance(0.5):
            w.add(f"{wq}, {wk} = " + w.pick(f"W1[:{dq}], W1[{dq}:]",
                                           f"np.split(W1, [{dq}], axis=0)"))
        else:
            w.any_order((f"{wq} = W1[:{dq}]", ""), (f"{wk} = W1[{dq}:]", ""))
        hq, hk = w.name("h_q"), w.name("h_k")
        w.any_order((f"{hq} = {q} @ {wq}", ""), (f"{hk} = {k} @ {wk}", ""))
        w.add(f"{h} = " + w.pick(f"np.tanh({hq}[..., None, :] + {hk})",
                                 f"np.tanh(np.expand_dims({hq}, -2) + {hk})"), "hidden")
        w.add(f"return {h} @ w2")
        return
    rep, cat = w.name("repeated"), w.name("stacked")
    if w.chance(0.3):
        n = w.name("n")
        w.add(f"{n} = {k}.shape[-2]")
        w.add(f"{rep} = np.repeat({q}[..., None, :], {n}, axis=-2)", "repeat")
    else:
        w.add(f"{rep} = " + w.often(0.6, 
            f"np.broadcast_to({q}[..., None, :], {k}.shape[:-1] + {q}.shape[-1:])",
            f"np.broadcast_to(np.expand_dims({q}, -2), {k}.shape[:-1] + ({q}.shape[-1],))",
            f"np.expand_dims({q}, -2) + np.zeros({k}.shape[:-1] + (1,))",
            f"np.repeat(np.expand_dims({q}, axis=-2), {k}.shape[-2], axis=-2)"), "repeat")
    w.add(f"{cat} = " + w.often(0.6, f"np.concatenate([{rep}, {k}], axis=-1)",
                               f"np.concatenate(({rep}, {k}), axis=-1)",
                               f"np.concatenate([{rep}, {k}], -1)"), "concat")
    hidden = w.often(0.6, f"np.tanh({cat} @ W1)", f"np.tanh(np.matmul({cat}, W1))",
                    f'np.tanh(np.einsum("...nc,ch->...nh", {cat}, W1))',
                    f"np.tanh(np.dot({cat}, W1))")
    final = w.often(0.6, "{} @ w2", "np.sum({} * w2, axis=-1)", 'np.einsum("...h,h->...", {}, w2)',
                   "np.dot({}, w2)")
    if w.chance(0.3):
        w.add("return " + final.format(hidden), "hidden")
    else:
        w.add(f"{h} = {hidden}", "hidden")
        w.add("return " + final.format(h))


def _scaled_dot_product_attention(w: Writer) -> None:
    s, wt, out = w.name("scores"), w.name("weights"), w.name("output")
    habit = w.pick("none", "none", "each", "query")
    if habit == "each":
        q, k, v = (w.name(c) if w.chance(0.3) else p
                   for p, c in (("query", "q"), ("key", "k"), ("value", "v")))
        converts = [(f"{n} = ops.convert_to_tensor({p})", "convert")
                    for n, p in ((q, "query"), (k, "key"), (v, "value"))]
    elif habit == "query":
        q, k, v = "query", "key", "value"
        converts = [("query = ops.convert_to_tensor(query)", "convert")]
    else:
        q, k, v, converts = "query", "key", "value", []
    dk = w.name("d_k")
    dk_line = (f"{dk} = " + w.pick(f"ops.shape({q})[-1]", f"{q}.shape[-1]", f"ops.shape({k})[-1]",
                                   f"{k}.shape[-1]"), "")
    w.any_order(*converts, dk_line)
    product = w.often(0.55, f"ops.matmul({q}, ops.swapaxes({k}, -1, -2))",
                     f'ops.einsum("...qd,...kd->...qk", {q}, {k})',
                     f'ops.einsum("...id,...jd->...ij", {q}, {k})',
                     f"ops.matmul({q}, ops.moveaxis({k}, -1, -2))",
                     f"{q} @ ops.swapaxes({k}, -2, -1)")
    scale = w.often(0.55, "cast", "inverse", "numpy", "divide", "helper")
    if scale == "inverse":
        factor = w.name("scale")
        w.add(f"{factor} = 1.0 / np.sqrt({dk})", "scale")
        w.add(f"{s} = {product} * {factor}", "scores")
    elif scale == "numpy":
        w.add(f"{s} = {product} / np.sqrt({dk})", "scores")
    elif scale == "divide":
        w.add(f"{s} = {product}", "scores")
        w.add(f'{s} = ops.divide({s}, ops.sqrt(ops.cast({dk}, "float32")))', "scale")
    elif scale == "helper":
        helper, hs, hd = w.name("helper_scale"), w.local("scores"), w.local("d_k")
        w.helper("scaled_dot_product_attention", [
            f"def {helper}({hs}, {hd}):",
            "    return " + w.pick(f"{hs} / ops.sqrt(ops.cast({hd}, {hs}.dtype))",
                                   f"{hs} / np.sqrt({hd})", f"{hs} * (1.0 / np.sqrt({hd}))",
                                   f'ops.divide({hs}, ops.sqrt(ops.cast({hd}, "float32")))')])
        w.add(f"{s} = {helper}({product}, {dk})", "scores")
    else:
        w.add(f"{s} = {product}", "scores")
        w.add(f"{s} = {s} / ops.sqrt(ops.cast({dk}, " + w.pick(f"{s}.dtype", '"float32"') + "))",
              "scale")
    rule = w.often(0.55, f"ops.where(mask, {s}, large_negative({s}.dtype))",
                  f'ops.where(ops.cast(mask, "bool"), {s}, -1e9)',
                  f"{s} + (1.0 - ops.cast(mask, {s}.dtype)) * -1e9",
                  f"ops.where(mask, {s}, ops.full_like({s}, -1e9))",
                  f'{s} - 1e9 * (1.0 - ops.cast(mask, "float32"))', "helper", "allowed")
    if rule == "helper":
        helper, hs, hm = w.name("helper"), w.local("scores"), w.local("mask")
        hidden = w.pick(f"ops.where({hm}, {hs}, large_negative({hs}.dtype))",
                        f'ops.where(ops.cast({hm}, "bool"), {hs}, -1e9)',
                        f"{hs} + (1.0 - ops.cast({hm}, {hs}.dtype)) * -1e9",
                        f"ops.where({hm}, {hs}, ops.full_like({hs}, -1e9))")
        body = w.pick([f"    if {hm} is None:", f"        return {hs}", f"    return {hidden}"],
                      [f"    return {hs} if {hm} is None else {hidden}"],
                      [f"    if {hm} is not None:", f"        {hs} = {hidden}", f"    return {hs}"])
        w.helper("scaled_dot_product_attention", [f"def {helper}({hs}, {hm}):", *body])
        w.add(f"{s} = {helper}({s}, mask)", "mask")
    elif rule == "allowed":
        allowed = w.name("allowed")
        w.add(f"if mask is not None:\n"
              f'    {allowed} = ops.cast(mask, "bool")\n'
              f"    {s} = ops.where({allowed}, {s}, large_negative({s}.dtype))", "mask")
    else:
        w.add(f"if mask is not None:\n    {s} = {rule}", "mask")
    if w.chance(0.15):
        e = w.name("exp")
        w.add(f"{e} = ops.exp({s} - ops.max({s}, axis=-1, keepdims=True))")
        w.add(f"{wt} = {e} / ops.sum({e}, axis=-1, keepdims=True)", "weights")
    else:
        w.add(f"{wt} = " + w.often(0.6, f"ops.softmax({s}, axis=-1)", f"ops.softmax({s})",
                                  f"keras.activations.softmax({s}, axis=-1)"), "weights")
    product = w.often(0.6, f"ops.matmul({wt}, {v})", f"{wt} @ {v}",
                     f'ops.einsum("...qk,...kv->...qv", {wt}, {v})')
    if w.chance(0.4):
        w.add(f"return {product}, {wt}", "output")
    else:
        w.add(f"{out} = {product}", "output")
        w.add(f"return {out}, {wt}")


WRITERS = {"dot_scores": _dot_scores, "softmax": _softmax, "attention_pool": _attention_pool,
           "bilinear_scores": _bilinear_scores, "additive_scores": _additive_scores,
           "scaled_dot_product_attention": _scaled_dot_product_attention}


@dataclass(frozen=True)
class Answers:
    """One author's answers: exercise -> body (indented), and helper functions."""

    bodies: dict[str, str]
    helpers: dict[str, str]


def answers(style: Style) -> Answers:
    """The six answer bodies (and helpers) an author with ``style`` writes."""
    w = Writer(style)
    bodies = {}
    for exercise in LAB.exercises:
        w.start()
        WRITERS[exercise](w)
        bodies[exercise] = w.body()
    helpers = {e: "\n\n\n".join(functions) for e, functions in w.helpers.items()}
    return Answers(bodies, helpers)


# --------------------------------------------------------------------------
# Notebooks
# --------------------------------------------------------------------------


_BLANK: dict = {}


def blank() -> nbformat.NotebookNode:
    """The released lab 1 notebook (read once)."""
    if not _BLANK:
        _BLANK["notebook"] = nbformat.read(LAB.student_path, as_version=4)
    return copy.deepcopy(_BLANK["notebook"])


def _grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def _signature(exercise: str) -> str:
    """The answer cell's first line (its def), as released."""
    if "signatures" not in _BLANK:
        _BLANK["signatures"] = {_grade_id(cell): cell.source.split("\n", 1)[0]
                                for cell in blank().cells if _grade_id(cell) in LAB.exercises}
    return _BLANK["signatures"][exercise]


def _scratch(rng: random.Random) -> str:
    """A cell a student adds to try a function out."""
    d, n = rng.randint(2, 6), rng.randint(2, 5)
    q, k = rng.choice(["q", "query", "qq", "test_q"]), rng.choice(["k", "keys", "kk", "test_k"])
    options = [
        f"{q} = np.random.randn({d})\n{k} = np.random.randn({n}, {d})\n"
        f"print(dot_scores({q}, {k}))\nprint({k} @ {q})",
        f"x = np.random.randn({n}, {d})\nprint(softmax(x, axis={rng.choice([0, -1])})"
        f".sum(axis={rng.choice([0, -1])}))",
        f"print(softmax(np.array([{rng.randint(1, 9)}.0, {rng.randint(1, 9)}.0, -np.inf])))",
        f"ctx, w = attention_pool(np.ones({d}), np.random.rand({n}, {d}), "
        f"np.random.rand({n}, {rng.randint(2, 4)}))\nprint(ctx.shape, w.shape, w.sum())",
        f"out, att = scaled_dot_product_attention(np.random.rand(2, {n}, {d}).astype('float32'), "
        f"np.random.rand(2, {n + 1}, {d}).astype('float32'), "
        f"np.random.rand(2, {n + 1}, 3).astype('float32'))\nprint(out.shape, att.shape)",
        f"dot_scores(np.array([1.0, {rng.randint(0, 5)}.0]), np.eye(2))",
        f"{k} = np.random.rand({n}, {d})\n"
        f"print(bilinear_scores(np.ones({d}), {k}, np.eye({d})) - dot_scores(np.ones({d}), {k}))",
        f"print(additive_scores(np.ones({d}), np.ones(({n}, {d})), np.ones(({2 * d}, 3)), "
        f"np.ones(3)).shape)",
        "np.einsum?" if rng.random() < 0.1 else "help(np.einsum)",
    ]
    return rng.choice(options)


def _edit_demo(cell, rng: random.Random) -> None:
    """An edited provided cell: a number changed and a line of the student's added."""
    source = cell.source
    numbers = re.findall(r"default_rng\((\d+)\)", source)
    if numbers:
        source = source.replace(f"default_rng({numbers[0]})", f"default_rng({rng.randint(10, 9999)})")
    names = sorted(set(re.findall(r"^(\w+)\s*=", source, re.M))) or ["weights"]
    name, digits, axis = rng.choice(names), rng.randint(1, 4), rng.choice([-1, 0, 1])
    cell.source = source + "\n" + rng.choice([
        f"print({name}.shape)", f"print(np.round({name}, {digits}))",
        f"print({name}.sum(axis={axis}))", f"print('{name}:', {name})", f"print(type({name}))",
        f"print(np.allclose({name}.sum(axis={axis}), 1))", "# my notes: rows sum to 1", name])


@dataclass(frozen=True)
class Notebook:
    """How one notebook is put together (see :func:`notebook`).

    Attributes:
        answers: the author's answers (the copied ones, for a copier).
        own: seed of the notebook's own additions (scratch cells, an edited demo).
        moved: None (answers in their cells), "end" (one new cell at the end,
            functions in another order, answer cells left as released) or
            "after" (one new cell after each answer cell, left as ``pass``).
        helpers_after: helper functions after the answer's def (else before).
    """

    answers: Answers
    own: int
    moved: str | None = None
    helpers_after: bool = False


def _new_cell(source: str, number: int) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, id=f"added-{number}")


def notebook(plan: Notebook) -> nbformat.NotebookNode:
    """The blank notebook filled as ``plan`` says (nothing is run)."""
    rng = random.Random(f"own:{plan.own}")
    nb = blank()
    keep_marker = rng.random() < 0.2
    definitions = {}
    for exercise in LAB.exercises:
        body = plan.answers.bodies.get(exercise)
        if body is None:
            continue
        helper = plan.answers.helpers.get(exercise)
        definition = _signature(exercise) + "\n" + body
        if helper:
            definition = (definition + "\n\n\n" + helper if plan.helpers_after
                          else helper + "\n\n\n" + definition)
        definitions[exercise] = definition
    cells, added = [], 0
    for cell in nb.cells:
        grade_id = _grade_id(cell)
        if cell.cell_type == "code" and grade_id in LAB.exercises and plan.moved != "end":
            if grade_id not in definitions:
                cells.append(cell)
                continue
            if plan.moved == "after":
                cell.source = cell.source.replace(PLACEHOLDER, "    pass")
                cells.append(cell)
                added += 1
                cells.append(_new_cell(definitions[grade_id], added))
                continue
            body = plan.answers.bodies[grade_id]
            if keep_marker:
                body = "    # YOUR CODE HERE\n" + body
            cell.source = cell.source.replace(PLACEHOLDER, body)
            helper = plan.answers.helpers.get(grade_id)
            if helper:
                cell.source = (cell.source + "\n\n\n" + helper if plan.helpers_after
                               else helper + "\n\n\n" + cell.source)
        if grade_id.startswith("demo_") and rng.random() < 0.08:
            _edit_demo(cell, rng)
        cells.append(cell)
        if grade_id.startswith("check_") and rng.random() < 0.12:
            added += 1
            cells.append(_new_cell(_scratch(rng), added))
    if plan.moved == "end":
        order = list(LAB.exercises)
        random.Random(f"move:{plan.own}").shuffle(order)
        added += 1
        cells.insert(len(cells) - 1, _new_cell("\n\n\n".join(definitions[e] for e in order
                                                               if e in definitions), added))
    nb.cells = cells
    return nb


# --------------------------------------------------------------------------
# The class
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class GeneratedClass:
    """A class: student id -> notebook, and the planted copies.

    Attributes:
        notebooks: student id -> notebook (in memory).
        copies: (a, b), a < b, of each planted copy -> its kind (COPY_KINDS).
        authors: how many notebooks were written independently.
    """

    notebooks: dict[str, nbformat.NotebookNode]
    copies: dict[tuple[str, str], str]
    authors: int

    def write(self, folder: Path) -> dict[str, Path]:
        """Write every notebook to ``folder`` (created); student id -> path."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = {}
        for student_id, nb in self.notebooks.items():
            paths[student_id] = folder / f"{student_id}.ipynb"
            nbformat.write(nb, paths[student_id])
        return paths


def _copy_plan(kind: str, style: Style, own: int, seed: int) -> Notebook:
    changed = seed * 1000 + 7
    if kind == "partial":
        mine, theirs = answers(Style(own, own, own, own)), answers(style)
        copied = random.Random(f"partial:{seed}").sample(LAB.exercises, len(LAB.exercises) // 2)
        return Notebook(Answers({e: (theirs if e in copied else mine).bodies[e]
                                 for e in LAB.exercises},
                                {e: helper for e in LAB.exercises
                                 for helper in [(theirs if e in copied else mine).helpers.get(e)]
                                 if helper}), own)
    if kind == "verbatim":
        return Notebook(answers(style), own)
    if kind == "renamed":
        return Notebook(answers(replace(style, names=changed, comments=changed)), own)
    if kind == "reordered":
        return Notebook(answers(replace(style, flip=True)), own, helpers_after=True)
    if kind == "moved":
        return Notebook(answers(style), own, moved="end")
    if kind == "respaced":
        return Notebook(answers(replace(style, comments=changed, respace=True)), own)
    if kind == "disguised":
        return Notebook(answers(replace(style, names=changed, flip=True,
                                        comments=changed)), own, moved="after",
                        helpers_after=True)
    raise ValueError(f"Unknown copy kind {kind!r}: expected one of "
                     f"{', '.join(COPY_KINDS + MORE_KINDS)}.")


#: Authors who answer one or two exercises only (the first ones; never copied).
NEARLY_BLANK = 2
#: The chance that an author leaves an exercise as released.
SKIP = 0.06


def _skipping(written: Answers, author: int, seed: int) -> Answers:
    """``written`` less the exercises the author leaves unanswered."""
    rng = random.Random(f"skip:{seed}:{author}")
    if author < NEARLY_BLANK:
        kept = set(rng.sample(LAB.exercises, author + 1))
    else:
        kept = {e for e in LAB.exercises if rng.random() >= SKIP}
    return Answers({e: b for e, b in written.bodies.items() if e in kept},
                   {e: h for e, h in written.helpers.items() if e in kept})


def _skipped_as(copied: Answers, source: Answers, kind: str) -> Answers:
    """A copy leaves unanswered what its source left (a partial copy: what it copied)."""
    if kind == "partial":
        return copied
    return Answers({e: b for e, b in copied.bodies.items() if e in source.bodies},
                   {e: h for e, h in copied.helpers.items() if e in source.bodies})


def generate(authors: int = 30, kinds: tuple[str, ...] = COPY_KINDS, seed: int = 0
             ) -> GeneratedClass:
    """``authors`` independent notebooks and one planted copy of each kind.

    Student ids are ``student_NN``, shuffled (the copies are not the last
    ones); each copier copies a different author.
    """
    if authors < len(kinds):
        raise ValueError(f"authors is {authors}: expected at least one author per copy "
                         f"({len(kinds)}).")
    rng = random.Random(f"class:{seed}")
    total = authors + len(kinds)
    ids = [f"student_{n:02d}" for n in range(1, total + 1)]
    rng.shuffle(ids)
    styles = [Style(choices=seed * 10_000 + i, names=seed * 10_000 + i,
                    order=seed * 10_000 + i, comments=seed * 10_000 + i) for i in range(authors)]
    written = [_skipping(answers(style), i, seed) for i, style in enumerate(styles)]
    notebooks = {ids[i]: notebook(Notebook(written[i], own=seed * 10_000 + i))
                 for i in range(authors)}
    sources = rng.sample(range(NEARLY_BLANK, authors), len(kinds))
    copies = {}
    for number, (kind, source) in enumerate(zip(kinds, sources)):
        copier = ids[authors + number]
        plan = _copy_plan(kind, styles[source], own=seed * 10_000 + authors + number,
                          seed=seed * 100 + number)
        plan = replace(plan, answers=_skipped_as(plan.answers, written[source], kind))
        notebooks[copier] = notebook(plan)
        copies[tuple(sorted((copier, ids[source])))] = kind
    return GeneratedClass(dict(sorted(notebooks.items())), copies, authors)
