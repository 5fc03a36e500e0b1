"""Sample submissions of lab 6 (a decoder-only language model): the interface is
tests/samples.py's.

Correct answers written differently from the solution (rotary embeddings as
`x * cos + quarter_turn(x) * sin` with each angle repeated for its pair, the
block's scores and mixing as einsums with its mask cut from a full lower
triangle, the tied output as an einsum with the embedding table, the loss by
`log_softmax` and `take_along_axis`, perplexity summed in NumPy, top-k by
`ops.top_k`, top-p row by row with `np.searchsorted`, generation in a
fixed-size buffer with Gumbel-max sampling), the mistakes students really
make, and the untouched notebook. The attribute names stay those of the lab,
so the shipped weights load into these models too.

An exercise's points are split between its tests cells, one per property (its
main computation, `start`, causality, the cache, sampling, the config...), so
each mistake names the cells it fails. The grader tests an exercise with
stand-ins in place of the exercises it calls (standins.toml), so a mistake
costs points in its own exercise only. `python data/sample_submissions/build.py
lab6` rebuilds data/sample_submissions/lab6/ after the lab changes.
"""

from tests.samples import mistake, swap

# Correct answers, written differently from the solution. The attribute names
# stay those of the lab, so the shipped weights load into these models too.
CORRECT = {
    "RotaryEmbedding": '''
class RotaryEmbedding(keras.layers.Layer):
    """x * cos + (x turned a quarter, pair by pair) * sin, each angle repeated for its pair."""

    def __init__(self, head_dim, base=10_000.0, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(head_dim=head_dim)
        check_even("head_dim", head_dim)
        self.head_dim, self.base = head_dim, base

    def call(self, x, start=0):
        x = ops.convert_to_tensor(x)
        pair = ops.cast(ops.arange(self.head_dim // 2), "float32")
        frequency = ops.exp(-math.log(self.base) * 2.0 * pair / self.head_dim)
        position = ops.cast(ops.arange(start, start + ops.shape(x)[-2]), "float32")
        angles = ops.repeat(ops.outer(position, frequency), 2, axis=-1)  # (T, head_dim)
        # (x[2i], x[2i+1]) -> (-x[2i+1], x[2i]): each pair turned by a right angle
        quarter = ops.reshape(ops.stack([-x[..., 1::2], x[..., 0::2]], axis=-1), ops.shape(x))
        return x * ops.cast(ops.cos(angles), x.dtype) + quarter * ops.cast(ops.sin(angles),
                                                                            x.dtype)

    def get_config(self):
        return {**super().get_config(), "head_dim": self.head_dim, "base": self.base}
''',
    "DecoderOnlyBlock": '''
class DecoderOnlyBlock(keras.layers.Layer):
    """einsums for the scores and the mixing; the mask cut from a full lower triangle."""

    def __init__(self, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff)
        check_even("d_model // num_heads", d_model // num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.head_dim = d_model // num_heads
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.query_dense = keras.layers.Dense(d_model)
        self.key_dense = keras.layers.Dense(d_model)
        self.value_dense = keras.layers.Dense(d_model)
        self.output_dense = keras.layers.Dense(d_model)
        self.rotary = RotaryEmbedding(self.head_dim)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.ffn = FeedForward(d_model, dff)
        self.last_attention_scores = None

    def call(self, x, cache=None, return_cache=False):
        x = ops.convert_to_tensor(x)
        past = 0 if cache is None else int(cache[0].shape[2])  # the cached positions
        normed = self.norm1(x)

        def heads(dense):
            return split_heads(dense(normed), self.num_heads)

        q = self.rotary(heads(self.query_dense), start=past)
        k = self.rotary(heads(self.key_dense), start=past)
        v = heads(self.value_dense)
        if cache is not None:
            k = ops.concatenate([ops.cast(cache[0], k.dtype), k], axis=2)
            v = ops.concatenate([ops.cast(cache[1], v.dtype), v], axis=2)
        total, new = ops.shape(k)[2], ops.shape(q)[2]
        visible = (ops.tril(ops.ones((total, total))) > 0)[total - new:]  # the new rows
        scores = ops.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.head_dim)
        weights = ops.softmax(ops.where(visible, scores, -1e9), axis=-1)
        self.last_attention_scores = weights
        attended = merge_heads(ops.einsum("bhqk,bhkd->bhqd", weights, v))
        h = x + self.output_dense(attended)
        out = h + self.ffn(self.norm2(h))
        if return_cache:
            return out, (k, v)
        return out

    def get_config(self):
        config = super().get_config()
        for name in ("d_model", "num_heads", "dff"):
            config[name] = getattr(self, name)
        return config
''',
    "MiniGPT": '''
class MiniGPT(keras.Model):
    """Blocks appended in a loop; the tied output as an einsum with the embedding table."""

    def __init__(self, vocab_size, num_layers, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, num_layers=num_layers, d_model=d_model,
                                 num_heads=num_heads, dff=dff)
        self.sizes = dict(vocab_size=vocab_size, num_layers=num_layers, d_model=d_model,
                          num_heads=num_heads, dff=dff)
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)
        self.blocks = []
        for _ in range(num_layers):
            self.blocks.append(DecoderOnlyBlock(d_model, num_heads, dff))
        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)

    def call(self, token_ids, cache=None, return_cache=False, training=None):
        x = self.token_embedding(token_ids)
        given = [None] * len(self.blocks) if cache is None else list(cache)
        returned = []
        for block, block_cache in zip(self.blocks, given):
            x, kept = block(x, cache=block_cache, return_cache=True)
            returned.append(kept)
        x = self.final_norm(x)
        logits = ops.einsum("btd,vd->btv", x, self.token_embedding.embeddings)
        return (logits, returned) if return_cache else logits

    def get_config(self):
        return {**super().get_config(), **self.sizes}
''',
    "next_token_loss": '''
def next_token_loss(logits, token_ids, pad_id=0):
    """log_softmax and take_along_axis, the padding as a 0/1 weight."""
    logits = ops.convert_to_tensor(logits)
    ids = ops.cast(ops.convert_to_tensor(token_ids), "int32")
    log_p = ops.log_softmax(logits[:, :-1], axis=-1)  # position t predicts ...
    targets = ids[:, 1:]  # ... token t + 1
    picked = ops.take_along_axis(log_p, ops.expand_dims(targets, -1), axis=-1)[..., 0]
    weight = ops.cast(ops.not_equal(targets, pad_id), log_p.dtype)
    return -ops.sum(picked * weight) / ops.sum(weight)
''',
    "perplexity": '''
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    """Summed in NumPy: the log-probability of every real target, batch by batch."""
    ids = np.asarray(ops.convert_to_numpy(token_ids))
    nats, targets = 0.0, 0
    for rows in np.array_split(ids, range(batch_size, len(ids), batch_size)):
        z = np.asarray(ops.convert_to_numpy(model(rows, training=False)), "float64")[:, :-1]
        z = z - z.max(axis=-1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        following = rows[:, 1:]
        real = following != pad_id
        picked = np.take_along_axis(log_p, following[..., None].astype(int), axis=-1)[..., 0]
        nats -= picked[real].sum()
        targets += int(real.sum())
    return float(np.exp(nats / targets))
''',
    "top_k_filter": '''
def top_k_filter(logits, k):
    """ops.top_k gives the k-th largest value of each row; ties with it stay."""
    logits = ops.convert_to_tensor(logits, "float32")
    k = min(int(k), logits.shape[-1])
    kth = ops.top_k(logits, k)[0][..., -1:]
    return ops.where(logits >= kth, logits, float("-inf"))
''',
    "top_p_filter": '''
def top_p_filter(logits, p):
    """Row by row: how many tokens it takes, by np.searchsorted on the running total."""
    values = np.asarray(ops.convert_to_numpy(logits), "float32")
    rows = values.reshape(-1, values.shape[-1])
    out = np.full_like(rows, -np.inf)
    for index, row in enumerate(rows):
        z = row.astype("float64")
        probabilities = np.exp(z - z.max())
        probabilities /= probabilities.sum()
        order = np.argsort(-probabilities, kind="stable")  # most probable first
        running = np.cumsum(probabilities[order])
        # the first token whose running total reaches p is the last one kept
        needed = len(row) if p >= 1 else min(int(np.searchsorted(running, p)) + 1, len(row))
        out[index, order[:needed]] = row[order[:needed]]
    return out.reshape(values.shape)
''',
    "generate": '''
def generate(model, prompt_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
             end_id=None, seed=None):
    """A buffer of P + max_new_tokens ids; Gumbel-max sampling; the model called at the
    top of each step, with the prompt first and then the token written last."""
    prompt = np.asarray(ops.convert_to_numpy(prompt_ids)).astype("int64")
    rows, length = prompt.shape
    buffer = np.zeros((rows, length + max_new_tokens), dtype="int64")
    buffer[:, :length] = prompt
    rng = np.random.default_rng(seed)
    ended = np.zeros(rows, dtype=bool)
    written = 0
    for step in range(max_new_tokens):
        if step == 0:
            logits, caches = model(prompt, return_cache=True, training=False)
        else:
            logits, caches = model(buffer[:, length + step - 1:length + step], cache=caches,
                                   return_cache=True, training=False)
        scores = np.asarray(ops.convert_to_numpy(logits), "float64")[:, -1]
        if temperature == 0:
            token = scores.argmax(axis=-1)
        else:
            scores = scores / temperature
            if top_k is not None:
                scores = np.asarray(ops.convert_to_numpy(top_k_filter(scores, top_k)), "float64")
            if top_p is not None:
                scores = np.asarray(ops.convert_to_numpy(top_p_filter(scores, top_p)), "float64")
            token = np.argmax(scores + rng.gumbel(size=scores.shape), axis=-1)
        token = np.where(ended, 0, token)
        buffer[:, length + step] = token
        written = step + 1
        if end_id is not None:
            ended |= token == end_id
            if ended.all():
                break
    return buffer[:, :length + written]
''',
}

VARIANTS: dict[str, tuple[str, str]] = {}

# mistake -> mistake(the exercise it is in, the answer cell with the mistake, the
# tests cells it fails: all of its exercise's unless named)
MISTAKES = {
    # Each pair turned clockwise, (1, 0) -> (cos, -sin): the values are wrong (the
    # values cell names it); the positions from `start` are right (the start cell
    # grades them only) and the config keeps its 0.5.
    "rotary_clockwise": mistake("RotaryEmbedding", swap(
        CORRECT["RotaryEmbedding"], "ops.stack([-x[..., 1::2], x[..., 0::2]], axis=-1)",
        "ops.stack([x[..., 1::2], -x[..., 0::2]], axis=-1)"),
        ("test_RotaryEmbedding",)),
    # `start` accepted and ignored: every call counts its rows from position 0. Only
    # the start cell (0.5) is lost.
    "rotary_ignores_start": mistake("RotaryEmbedding", swap(
        CORRECT["RotaryEmbedding"], "ops.arange(start, start + ops.shape(x)[-2])",
        "ops.arange(ops.shape(x)[-2])"),
        ("test_RotaryEmbedding__start",)),
    # The upper triangle instead of the lower: each query sees itself and every
    # LATER key. The values and causality are wrong; the cache, judged against the
    # block itself, and the config keep their points.
    "block_sees_future": mistake("DecoderOnlyBlock", swap(
        CORRECT["DecoderOnlyBlock"], "ops.tril(ops.ones((total, total)))",
        "ops.triu(ops.ones((total, total)))"),
        ("test_DecoderOnlyBlock", "test_DecoderOnlyBlock__causal")),
    # Post-norm, as lab 4: the sublayers read x itself and the residual stream is
    # normalised after each. Still causal: the outputs are wrong; causality, the
    # cache (judged against the block itself) and the config keep their points.
    "block_post_norm": mistake("DecoderOnlyBlock", swap(swap(
        CORRECT["DecoderOnlyBlock"], "normed = self.norm1(x)", "normed = x"),
        "        h = x + self.output_dense(attended)\n"
        "        out = h + self.ffn(self.norm2(h))",
        "        h = self.norm1(x + self.output_dense(attended))\n"
        "        out = self.norm2(h + self.ffn(h))"),
        ("test_DecoderOnlyBlock",)),
    # After a cache, the new tokens rotated from the LAST cached position (P - 1)
    # instead of the next one (P): right without a cache, the cache cell (1) lost.
    "block_cache_off_by_one": mistake("DecoderOnlyBlock", swap(
        CORRECT["DecoderOnlyBlock"], "past = 0 if cache is None else int(cache[0].shape[2])",
        "past = 0 if cache is None else int(cache[0].shape[2]) - 1"),
        ("test_DecoderOnlyBlock__cache",)),
    # An output Dense of its own instead of the tied embedding: vocab_size * (d_model
    # + 1) weights too many, logits the grader's weights do not give; the cache
    # (judged against the model itself) and the config keep their points.
    "minigpt_untied_dense": mistake("MiniGPT", swap(swap(
        CORRECT["MiniGPT"],
        "        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)\n",
        "        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)\n"
        "        self.output_layer = keras.layers.Dense(vocab_size)\n"),
        'logits = ops.einsum("btd,vd->btv", x, self.token_embedding.embeddings)',
        "logits = self.output_layer(x)"),
        ("test_MiniGPT",)),
    # get_config left as the stub's `super().get_config()`: no constructor argument;
    # the computation is right (0.5 lost).
    "minigpt_config_stub": mistake("MiniGPT", swap(
        CORRECT["MiniGPT"], "return {**super().get_config(), **self.sizes}",
        "return super().get_config()"),
        ("test_MiniGPT__config",)),
    # No shift: the logits at t compared with the token at t (padding left out). The
    # value is wrong (1.5 lost); still keras.ops, so differentiable (0.5 kept).
    "loss_no_shift": mistake("next_token_loss", '''
def next_token_loss(logits, token_ids, pad_id=0):
    losses = keras.losses.sparse_categorical_crossentropy(token_ids, logits, from_logits=True)
    mask = ops.cast(ops.not_equal(token_ids, pad_id), losses.dtype)
    return ops.sum(losses * mask) / ops.sum(mask)
''', ("test_next_token_loss",)),
    # The mean of the batches' losses: a short last batch weighs as much as a full one.
    "perplexity_mean_of_means": mistake("perplexity", '''
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    losses = []
    for start in range(0, len(token_ids), batch_size):
        batch = token_ids[start:start + batch_size]
        loss = next_token_loss(model(batch, training=False), batch, pad_id=pad_id)
        losses.append(float(ops.convert_to_numpy(loss)))
    return math.exp(np.mean(losses))
'''),
    # argsort's last k: exactly k logits, the ties with the k-th one dropped.
    "top_k_drops_ties": mistake("top_k_filter", '''
def top_k_filter(logits, k):
    values = np.asarray(ops.convert_to_numpy(logits), "float32")
    keep = np.argsort(values, axis=-1)[..., -k:]
    out = np.full_like(values, -np.inf)
    np.put_along_axis(out, keep, np.take_along_axis(values, keep, axis=-1), axis=-1)
    return out
'''),
    # Tokens kept while the running total INCLUDING them is at most p: the token
    # that crosses p is dropped (and with a small p, every token).
    "top_p_drops_crossing": mistake("top_p_filter", '''
def top_p_filter(logits, p):
    values = np.asarray(ops.convert_to_numpy(logits), "float32")
    probabilities = np.exp(values - values.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    order = np.argsort(-probabilities, axis=-1)
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    keep = np.zeros(values.shape, dtype=bool)
    np.put_along_axis(keep, order, np.cumsum(ranked, axis=-1) <= p, axis=-1)
    return np.where(keep, values, -np.inf)
'''),
    # No cache: the whole prefix recomputed at every step. The same tokens, the
    # sampling right; only the cache cell (1) lost.
    "generate_no_cache": mistake("generate", swap(
        CORRECT["generate"],
        """        if step == 0:
            logits, caches = model(prompt, return_cache=True, training=False)
        else:
            logits, caches = model(buffer[:, length + step - 1:length + step], cache=caches,
                                   return_cache=True, training=False)
""", """        logits = model(buffer[:, :length + step], training=False)
"""),
        ("test_generate__cache",)),
    # The filters on the raw logits, the temperature after them: top-p keeps the
    # tokens of the unscaled distribution. Greedy and the cache are right; the
    # sampling cell (1) lost.
    "generate_filters_before_temperature": mistake("generate", swap(swap(
        CORRECT["generate"], "            scores = scores / temperature\n", ""),
        "            token = np.argmax(",
        "            scores = scores / temperature\n            token = np.argmax("),
        ("test_generate__sampling",)),
}

# student file -> the mistakes in it
SAMPLES = {
    "alice.ipynb": set(),
    "bob.ipynb": {"loss_no_shift", "top_k_drops_ties"},
    # carol's MiniGPT uses her DecoderOnlyBlock; the grader's stand-in replaces it
    # while MiniGPT is tested, so only the block loses points.
    "carol.ipynb": {"block_sees_future", "top_p_drops_crossing"},
    # erin's block rotates with her clockwise RotaryEmbedding: the stand-in keeps
    # that from costing her twice.
    "erin.ipynb": {"rotary_clockwise", "generate_no_cache"},
    "frank.ipynb": {"block_post_norm", "perplexity_mean_of_means"},
    "grace.ipynb": {"minigpt_untied_dense", "generate_filters_before_temperature"},
    # The computations right, the cache and the config missed: only secondary
    # properties lost.
    "heidi.ipynb": {"block_cache_off_by_one", "rotary_ignores_start", "minigpt_config_stub"},
}

UNTOUCHED = "dave.ipynb"
COLAB = None
CUT_SHORT = None

FEEDBACK_WORDS = [
    ("bob", "next_token_loss", "predict token t + 1"),
    ("bob", "top_k_filter", "with ties"),
    ("carol", "DecoderOnlyBlock", "changed the outputs before it"),
    ("carol", "top_p_filter", "every logit removed"),
    ("erin", "RotaryEmbedding", "counter-clockwise"),
    ("erin", "generate", "the new token alone"),
    ("frank", "DecoderOnlyBlock", "random weights"),
    ("frank", "perplexity", "batch_size=3"),
    ("grace", "MiniGPT", "the output is tied"),
    ("grace", "generate", "divide by the temperature, then top_k_filter"),
    ("heidi", "RotaryEmbedding", "start=5"),
    ("heidi", "DecoderOnlyBlock", "cache=(keys, values)"),
    ("heidi", "MiniGPT", "get_config()"),
]
#: frank's page gives the block's hint: pre-norm, which his post-norm block is not.
FEEDBACK_PAGE_WORDS = [("frank", 'class="hint"'), ("frank", "Pre-norm")]
