"""Verdict suite of lab 6 (a decoder-only language model): correct variants and real mistakes.

Every source is a whole answer cell as a student would fill it. Earlier cells
of the notebook have put in scope: `math`, `time`, `np`, `keras`, `ops`, `plt`,
`labkit` (`checks`, `datasets`, `language`, `plots`), and the provided
`validate_layer_arguments`, `FeedForward`, `split_heads`, `merge_heads` and
`check_even`.

The notebook loads the shipped weights into the student's MiniGPT by attribute
name, and the grader sets its weights sublayer by sublayer by the names the lab
fixes, so every DecoderOnlyBlock and MiniGPT variant keeps those attribute names
(`norm1`, `query_dense`, `key_dense`, `value_dense`, `output_dense`, `rotary`,
`norm2`, `ffn`; `token_embedding`, `blocks`, `final_norm`) and creates exactly
the same weights.

Honest readings (answers written from the notebook's text alone) are among the
variants: no `get_config` at all in a Layer (Keras builds the config from the
constructor's arguments), sublayers made in `build`, one call of the model after
the last new token ("one call per new token"), `-1e9` instead of `-inf`, the
attention worked head by head, the rotary angles in float32. Mistakes in a
secondary property (the start, the cache, the config, sampling, a loss that is
not differentiable) name the tests cells they must fail (`fails`);
the others keep their points. Every mistake fails its exercise's visible check
too.
"""

from tests.verdicts import Mistake, own_share, swap


# --- RotaryEmbedding -----------------------------------------------------------------

_ROTARY_INIT = '''
class RotaryEmbedding(keras.layers.Layer):
    def __init__(self, head_dim, base=10_000.0, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(head_dim=head_dim)
        check_even("head_dim", head_dim)
        self.head_dim = head_dim
        self.base = base
'''

_ROTARY_CONFIG = '''
    def get_config(self):
        config = super().get_config()
        config.update(head_dim=self.head_dim, base=self.base)
        return config
'''

# Complex numbers: pair i is x[2i] + 1j * x[2i+1], multiplied by exp(1j * m * theta_i).
ROTARY_COMPLEX = _ROTARY_INIT + '''
    def call(self, x, start=0):
        x = ops.convert_to_tensor(x, dtype="float32")
        shape = ops.shape(x)
        half = self.head_dim // 2
        pairs = ops.view_as_complex(ops.reshape(x, (*shape[:-1], half, 2)))  # (..., T, half)
        theta = self.base ** (-2.0 * np.arange(half) / self.head_dim)
        m = ops.cast(ops.arange(shape[-2]), "float32") + float(start)
        angle = ops.outer(m, ops.convert_to_tensor(theta.astype("float32")))  # (T, half)
        phasor = ops.view_as_complex(ops.stack([ops.cos(angle), ops.sin(angle)], axis=-1))
        return ops.reshape(ops.view_as_real(pairs * phasor), shape)
''' + _ROTARY_CONFIG

# The interleaved "rotate half": x * cos + (-x1, x0, -x3, x2, ...) * sin, the angles
# repeated for both features of a pair, the partner vector built by stack + reshape.
ROTARY_INTERLEAVE = _ROTARY_INIT + '''
    def call(self, x, start=0):
        x = ops.convert_to_tensor(x)
        n = ops.shape(x)[-2]
        steps = ops.arange(start, start + n, dtype="float32")
        inverse = 1.0 / (self.base ** (np.arange(0, self.head_dim, 2) / self.head_dim))
        angles = ops.outer(steps, ops.convert_to_tensor(inverse.astype("float32")))  # (T, d/2)
        angles = ops.repeat(angles, 2, axis=-1)  # theta_0, theta_0, theta_1, theta_1, ...
        partner = ops.reshape(ops.stack([-x[..., 1::2], x[..., 0::2]], axis=-1), ops.shape(x))
        return x * ops.cos(angles) + partner * ops.sin(angles)

    def get_config(self):
        return {**super().get_config(), "head_dim": self.head_dim, "base": self.base}
'''

# Tables of cos and sin precomputed once (float64, then float32) for 4096 positions,
# sliced from `start`; get_config left to Keras (a Layer's config is built from the
# constructor's arguments).
ROTARY_TABLES = '''
class RotaryEmbedding(keras.layers.Layer):
    MAX_POSITIONS = 4096

    def __init__(self, head_dim, base=10_000.0, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(head_dim=head_dim)
        check_even("head_dim", head_dim)
        self.head_dim = head_dim
        self.base = base
        frequencies = base ** (-np.arange(0, head_dim, 2, dtype="float64") / head_dim)
        angles = np.arange(self.MAX_POSITIONS, dtype="float64")[:, None] * frequencies[None, :]
        self.cos_table = np.cos(angles).astype("float32")
        self.sin_table = np.sin(angles).astype("float32")

    def call(self, x, start=0):
        x = ops.convert_to_tensor(x)
        length = ops.shape(x)[-2]
        cos = ops.slice(self.cos_table, (start, 0), (length, self.head_dim // 2))
        sin = ops.slice(self.sin_table, (start, 0), (length, self.head_dim // 2))
        first, second = x[..., 0::2], x[..., 1::2]
        out = ops.stack([first * cos - second * sin, second * cos + first * sin], axis=-1)
        return ops.reshape(out, ops.shape(x))
'''

# The 2x2 rotation matrix of the text, one per position and pair, applied with einsum.
ROTARY_MATRIX = _ROTARY_INIT + '''
    def call(self, x, start=0):
        x = ops.convert_to_tensor(x)
        length = ops.shape(x)[-2]
        half = self.head_dim // 2
        theta = ops.power(ops.cast(self.base, "float32"),
                          -2.0 * ops.arange(half, dtype="float32") / self.head_dim)
        angle = ops.cast(ops.arange(length) + start, "float32")[:, None] * theta[None, :]
        c, s = ops.cos(angle), ops.sin(angle)
        rotation = ops.stack([ops.stack([c, -s], axis=-1), ops.stack([s, c], axis=-1)],
                             axis=-2)  # (T, half, 2, 2): [[cos, -sin], [sin, cos]]
        pairs = ops.reshape(x, (*ops.shape(x)[:-1], half, 2))  # (..., T, half, 2)
        turned = ops.einsum("thij,...thj->...thi", rotation, pairs)
        return ops.reshape(turned, ops.shape(x))
''' + _ROTARY_CONFIG

# The angles in float32 throughout (theta_i = exp(-2i ln(base) / head_dim), the
# positions a float32 arange plus start): far along (the hidden start goes up to
# 2047) float32 rounds the angles by ~2e-4, which the tolerance allows for.
ROTARY_FLOAT32 = _ROTARY_INIT + '''
    def call(self, x, start=0):
        x = ops.convert_to_tensor(x)
        length = ops.shape(x)[-2]
        pair = ops.arange(self.head_dim // 2, dtype="float32")
        theta = ops.exp(pair * (-2.0 * math.log(self.base) / self.head_dim))
        m = ops.arange(length, dtype="float32") + ops.cast(start, "float32")
        angles = m[:, None] * theta[None, :]  # float32, (T, head_dim / 2)
        c, s = ops.cos(angles), ops.sin(angles)
        a, b = x[..., 0::2], x[..., 1::2]
        return ops.reshape(ops.stack([a * c - b * s, a * s + b * c], axis=-1), ops.shape(x))
''' + _ROTARY_CONFIG

# --- DecoderOnlyBlock ----------------------------------------------------------------

_BLOCK_INIT = '''
class DecoderOnlyBlock(keras.layers.Layer):
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
'''

_BLOCK_CONFIG = '''
    def get_config(self):
        config = super().get_config()
        config.update({"d_model": self.d_model, "num_heads": self.num_heads, "dff": self.dff})
        return config
'''

# Heads by reshape, scores and weighted values by einsum; the future hidden with
# ops.triu (the keys after each query's position).
BLOCK_EINSUM = _BLOCK_INIT + '''
    def call(self, x, cache=None, return_cache=False):
        x = ops.convert_to_tensor(x)
        past = 0 if cache is None else cache[0].shape[2]
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        n = self.norm1(x)
        per_head = (batch, length, self.num_heads, self.head_dim)
        q = ops.transpose(ops.reshape(self.query_dense(n), per_head), (0, 2, 1, 3))
        k = ops.transpose(ops.reshape(self.key_dense(n), per_head), (0, 2, 1, 3))
        v = ops.transpose(ops.reshape(self.value_dense(n), per_head), (0, 2, 1, 3))
        q = self.rotary(q, start=past)
        k = self.rotary(k, start=past)
        if cache is not None:
            k = ops.concatenate([ops.convert_to_tensor(cache[0], dtype=k.dtype), k], axis=2)
            v = ops.concatenate([ops.convert_to_tensor(cache[1], dtype=v.dtype), v], axis=2)
        scores = ops.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.head_dim)
        future = ops.triu(ops.ones((length, past + length)), k=past + 1)  # key after query
        scores = ops.where(future > 0, -1e9, scores)
        weights = ops.softmax(scores, axis=-1)
        self.last_attention_scores = weights
        context = ops.einsum("bhqk,bhkd->bqhd", weights, v)
        h = x + self.output_dense(ops.reshape(context, (batch, length, self.d_model)))
        out = h + self.ffn(self.norm2(h))
        if return_cache:
            return out, (k, v)
        return out
''' + _BLOCK_CONFIG

# An additive mask of 0 and -inf made in NumPy; the provided split_heads / merge_heads;
# no get_config at all (a Layer's config is built from the constructor's arguments).
BLOCK_NEG_INF = _BLOCK_INIT + '''
    def call(self, x, cache=None, return_cache=False):
        normed = self.norm1(x)
        q = split_heads(self.query_dense(normed), self.num_heads)
        k = split_heads(self.key_dense(normed), self.num_heads)
        v = split_heads(self.value_dense(normed), self.num_heads)
        offset = 0
        if cache is not None:
            cached_keys, cached_values = cache
            offset = int(cached_keys.shape[2])
        q = self.rotary(q, start=offset)
        k = self.rotary(k, start=offset)
        if cache is not None:
            k = ops.concatenate([ops.cast(cached_keys, k.dtype), k], axis=2)
            v = ops.concatenate([ops.cast(cached_values, v.dtype), v], axis=2)
        new, total = q.shape[2], k.shape[2]
        query_at = offset + np.arange(new)[:, None]
        key_at = np.arange(total)[None, :]
        bias = np.where(key_at <= query_at, 0.0, -np.inf).astype("float32")
        scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * (self.head_dim ** -0.5) + bias
        self.last_attention_scores = ops.softmax(scores, axis=-1)
        attended = merge_heads(ops.matmul(self.last_attention_scores, v))
        h = ops.add(x, self.output_dense(attended))
        out = h + self.ffn(self.norm2(h))
        return (out, (k, v)) if return_cache else out
'''

# Sublayers made in build(); the causal mask as the last rows of the square
# (P + T, P + T) lower triangle.
BLOCK_BUILD = '''
class DecoderOnlyBlock(keras.layers.Layer):
    def __init__(self, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff)
        check_even("d_model // num_heads", d_model // num_heads)
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff
        self.last_attention_scores = None

    def build(self, input_shape):
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm1")
        self.query_dense = keras.layers.Dense(self.d_model, name="query_dense")
        self.key_dense = keras.layers.Dense(self.d_model, name="key_dense")
        self.value_dense = keras.layers.Dense(self.d_model, name="value_dense")
        self.output_dense = keras.layers.Dense(self.d_model, name="output_dense")
        self.rotary = RotaryEmbedding(self.d_model // self.num_heads, name="rotary")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm2")
        self.ffn = FeedForward(self.d_model, self.dff, name="ffn")

    def call(self, x, cache=None, return_cache=False):
        n1 = self.norm1(x)
        q, k, v = (split_heads(dense(n1), self.num_heads)
                   for dense in (self.query_dense, self.key_dense, self.value_dense))
        cached = 0 if cache is None else ops.shape(cache[0])[-2]
        q = self.rotary(q, start=cached)
        k = self.rotary(k, start=cached)
        if cache is not None:
            k = ops.concatenate((ops.convert_to_tensor(cache[0], k.dtype), k), axis=-2)
            v = ops.concatenate((ops.convert_to_tensor(cache[1], v.dtype), v), axis=-2)
        length = ops.shape(k)[-2]
        square = np.tril(np.ones((length, length), dtype=bool))  # causal, all positions
        mask = square[length - ops.shape(q)[-2]:]  # the rows of the new queries
        depth = ops.cast(ops.shape(q)[-1], q.dtype)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / ops.sqrt(depth)
        self.last_attention_scores = ops.softmax(ops.where(mask, scores, -1e9))
        attended = merge_heads(ops.matmul(self.last_attention_scores, v))
        h = ops.add(x, self.output_dense(attended))
        y = h + self.ffn(self.norm2(h))
        return (y, (k, v)) if return_cache else y

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "num_heads": self.num_heads,
                "dff": self.dff}
'''

# Head by head in a Python loop (each head's slice of the projections), the heads'
# keys, values and weights stacked on axis 1 at the end.
BLOCK_HEAD_LOOP = _BLOCK_INIT + '''
    def call(self, x, cache=None, return_cache=False):
        x = ops.convert_to_tensor(x)
        normed = self.norm1(x)
        queries = self.query_dense(normed)
        keys = self.key_dense(normed)
        values = self.value_dense(normed)
        start = 0 if cache is None else int(ops.shape(cache[0])[2])
        length = int(ops.shape(queries)[1])
        visible = (ops.arange(start + length)[None, :]
                   <= ops.arange(start, start + length)[:, None])  # (T, P + T)
        all_keys, all_values, outputs, all_weights = [], [], [], []
        for head in range(self.num_heads):
            first = head * self.head_dim
            q = self.rotary(queries[:, :, first:first + self.head_dim], start=start)
            k = self.rotary(keys[:, :, first:first + self.head_dim], start=start)
            v = values[:, :, first:first + self.head_dim]
            if cache is not None:
                k = ops.concatenate([ops.cast(cache[0][:, head], k.dtype), k], axis=1)
                v = ops.concatenate([ops.cast(cache[1][:, head], v.dtype), v], axis=1)
            scores = ops.einsum("btd,bsd->bts", q, k) / math.sqrt(self.head_dim)
            w = ops.softmax(ops.where(visible[None], scores, -1e9), axis=-1)
            outputs.append(ops.einsum("bts,bsd->btd", w, v))
            all_keys.append(k)
            all_values.append(v)
            all_weights.append(w)
        self.last_attention_scores = ops.stack(all_weights, axis=1)
        h = x + self.output_dense(ops.concatenate(outputs, axis=-1))
        out = h + self.ffn(self.norm2(h))
        if not return_cache:
            return out
        return out, (ops.stack(all_keys, axis=1), ops.stack(all_values, axis=1))
''' + _BLOCK_CONFIG

# Keras 3's fused ops.dot_product_attention (as keras-hub's models call it), heads as
# (B, T, H, head_dim), a boolean mask (1, 1, T, P + T): no attention weights to keep, so
# no last_attention_scores at all (the text: section 7's plot only, not graded).
BLOCK_FUSED = """
class DecoderOnlyBlock(keras.layers.Layer):
    def __init__(self, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(d_model=d_model, num_heads=num_heads, dff=dff)
        check_even("d_model // num_heads", d_model // num_heads)
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff
        self.head_dim = d_model // num_heads
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm1")
        self.query_dense = keras.layers.Dense(d_model, name="query_dense")
        self.key_dense = keras.layers.Dense(d_model, name="key_dense")
        self.value_dense = keras.layers.Dense(d_model, name="value_dense")
        self.output_dense = keras.layers.Dense(d_model, name="output_dense")
        self.rotary = RotaryEmbedding(self.head_dim, name="rotary")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6, name="norm2")
        self.ffn = FeedForward(d_model, dff, name="ffn")

    def call(self, x, cache=None, return_cache=False):
        x = ops.convert_to_tensor(x)
        normed = self.norm1(x)
        q, k, v = (split_heads(dense(normed), self.num_heads)
                   for dense in (self.query_dense, self.key_dense, self.value_dense))
        past = 0 if cache is None else int(ops.shape(cache[0])[2])
        q, k = self.rotary(q, start=past), self.rotary(k, start=past)
        if cache is not None:
            k = ops.concatenate([ops.cast(cache[0], k.dtype), k], axis=2)
            v = ops.concatenate([ops.cast(cache[1], v.dtype), v], axis=2)
        new = int(ops.shape(q)[2])
        visible = np.tril(np.ones((new, past + new), dtype=bool), k=past)  # key <= query
        context = ops.dot_product_attention(
            ops.transpose(q, (0, 2, 1, 3)), ops.transpose(k, (0, 2, 1, 3)),
            ops.transpose(v, (0, 2, 1, 3)), mask=visible[None, None],
            scale=1.0 / math.sqrt(self.head_dim))  # (B, T, H, head_dim)
        h = x + self.output_dense(ops.reshape(context, (ops.shape(x)[0], new, self.d_model)))
        out = h + self.ffn(self.norm2(h))
        return (out, (k, v)) if return_cache else out
""" + _BLOCK_CONFIG

# --- MiniGPT -------------------------------------------------------------------------

_MINIGPT_CONFIG = '''
    def get_config(self):
        config = super().get_config()
        for name in ("vocab_size", "num_layers", "d_model", "num_heads", "dff"):
            config[name] = getattr(self, name)
        return config
'''

# The tied output by einsum; the blocks appended in a loop; caches zipped with blocks.
MINIGPT_EINSUM = '''
class MiniGPT(keras.Model):
    def __init__(self, vocab_size, num_layers, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, num_layers=num_layers, d_model=d_model,
                                 num_heads=num_heads, dff=dff)
        self.vocab_size = vocab_size
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model)
        self.blocks = []
        for _ in range(num_layers):
            self.blocks.append(DecoderOnlyBlock(d_model, num_heads, dff))
        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)

    def call(self, token_ids, cache=None, return_cache=False, training=None):
        hidden = self.token_embedding(token_ids)
        pasts = [None] * len(self.blocks) if cache is None else list(cache)
        new_caches = []
        for block, past in zip(self.blocks, pasts):
            hidden, kv = block(hidden, cache=past, return_cache=True)
            new_caches.append(kv)
        hidden = self.final_norm(hidden)
        logits = ops.einsum("btd,vd->btv", hidden, self.token_embedding.embeddings)
        if return_cache:
            return logits, new_caches
        return logits
''' + _MINIGPT_CONFIG

# Sublayers made in build(); the tied output by tensordot; the caches a tuple.
MINIGPT_BUILD = '''
class MiniGPT(keras.Model):
    def __init__(self, vocab_size, num_layers, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, num_layers=num_layers, d_model=d_model,
                                 num_heads=num_heads, dff=dff)
        self.vocab_size, self.num_layers = vocab_size, num_layers
        self.d_model, self.num_heads, self.dff = d_model, num_heads, dff

    def build(self, input_shape):
        self.token_embedding = keras.layers.Embedding(self.vocab_size, self.d_model,
                                                      name="token_embedding")
        self.blocks = [DecoderOnlyBlock(self.d_model, self.num_heads, self.dff,
                                        name=f"decoder_block_{i}")
                       for i in range(self.num_layers)]
        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")

    def call(self, token_ids, cache=None, return_cache=False, training=None):
        x = self.token_embedding(token_ids)
        caches = ()
        for i in range(self.num_layers):
            x, kv = self.blocks[i](x, cache=cache[i] if cache is not None else None,
                                   return_cache=True)
            caches = caches + (kv,)
        x = self.final_norm(x)
        logits = ops.tensordot(x, self.token_embedding.embeddings, axes=[[2], [1]])
        return (logits, caches) if return_cache else logits

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "num_layers": self.num_layers, "d_model": self.d_model,
                "num_heads": self.num_heads, "dff": self.dff}
'''

# The caches collected only when asked for (the blocks called without return_cache
# otherwise); the table transposed and multiplied.
MINIGPT_ONLY_WHEN_ASKED = '''
class MiniGPT(keras.Model):
    def __init__(self, vocab_size, num_layers, d_model, num_heads, dff, **kwargs):
        super().__init__(**kwargs)
        validate_layer_arguments(vocab_size=vocab_size, num_layers=num_layers, d_model=d_model,
                                 num_heads=num_heads, dff=dff)
        self.vocab_size = vocab_size
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.token_embedding = keras.layers.Embedding(input_dim=vocab_size, output_dim=d_model,
                                                      name="token_embedding")
        self.blocks = [DecoderOnlyBlock(d_model=d_model, num_heads=num_heads, dff=dff)
                       for _ in range(num_layers)]
        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")

    def call(self, token_ids, cache=None, return_cache=False, training=None):
        x = self.token_embedding(token_ids)
        caches = []
        for index, block in enumerate(self.blocks):
            block_cache = cache[index] if cache is not None else None
            if return_cache:
                x, new = block(x, cache=block_cache, return_cache=True)
                caches.append(new)
            else:
                x = block(x, cache=block_cache)
        x = self.final_norm(x)
        table = ops.transpose(self.token_embedding.embeddings)  # (d_model, vocab_size)
        logits = ops.matmul(x, table)
        if return_cache:
            return logits, caches
        return logits
''' + _MINIGPT_CONFIG

# --- next_token_loss -----------------------------------------------------------------

# log_softmax, then the targets' log-probabilities picked with take_along_axis.
LOSS_LOG_SOFTMAX = '''
def next_token_loss(logits, token_ids, pad_id=0):
    log_p = ops.log_softmax(ops.convert_to_tensor(logits)[:, :-1], axis=-1)
    targets = ops.cast(ops.convert_to_tensor(token_ids)[:, 1:], "int32")
    picked = ops.take_along_axis(log_p, ops.expand_dims(targets, -1), axis=-1)
    picked = ops.squeeze(picked, -1)
    real = ops.cast(targets != pad_id, picked.dtype)
    return -ops.sum(picked * real) / ops.sum(real)
'''

# One-hot targets times log-probabilities.
LOSS_ONE_HOT = '''
def next_token_loss(logits, token_ids, pad_id=0):
    vocab = ops.shape(logits)[-1]
    predictions = logits[:, :-1, :]
    targets = ops.cast(token_ids[:, 1:], "int32")
    nll = -ops.sum(ops.one_hot(targets, vocab) * ops.log_softmax(predictions), axis=-1)
    keep = ops.cast(ops.not_equal(targets, pad_id), nll.dtype)
    return ops.divide(ops.sum(nll * keep), ops.sum(keep))
'''

# logsumexp minus the target's logit.
LOSS_LOGSUMEXP = '''
def next_token_loss(logits, token_ids, pad_id=0):
    z = ops.convert_to_tensor(logits)[:, :-1, :]
    y = ops.cast(ops.convert_to_tensor(token_ids)[:, 1:], "int32")
    chosen = ops.squeeze(ops.take_along_axis(z, y[..., None], axis=-1), axis=-1)
    per_token = ops.logsumexp(z, axis=-1) - chosen
    mask = ops.where(ops.equal(y, pad_id), 0.0, 1.0)
    return ops.sum(per_token * mask) / ops.sum(mask)
'''

# Keras's loss object summing the weighted terms, divided by the number of targets.
LOSS_OBJECT_SUM = '''
def next_token_loss(logits, token_ids, pad_id=0):
    targets = token_ids[:, 1:]
    weights = ops.cast(ops.not_equal(targets, pad_id), "float32")
    summed = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    return summed(targets, logits[:, :-1], sample_weight=weights) / ops.sum(weights)
'''

# --- perplexity ----------------------------------------------------------------------

# Each target's negative log-likelihood accumulated in NumPy (float64).
PERPLEXITY_NUMPY = '''
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    ids = np.asarray(ops.convert_to_numpy(token_ids))
    nll, n = 0.0, 0
    for i in range(0, ids.shape[0], batch_size):
        chunk = ids[i:i + batch_size]
        z = np.asarray(ops.convert_to_numpy(model(chunk, training=False)), "float64")[:, :-1]
        z = z - z.max(axis=-1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        targets = chunk[:, 1:]
        picked = np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
        real = targets != pad_id
        nll -= picked[real].sum()
        n += int(real.sum())
    return float(np.exp(nll / n))
'''

# The model run batch by batch, the logits put together, one next_token_loss over all.
PERPLEXITY_ALL_LOGITS = '''
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    ids = ops.convert_to_numpy(token_ids)
    pieces = [ops.convert_to_numpy(model(ids[s:s + batch_size], training=False))
              for s in range(0, len(ids), batch_size)]
    logits = np.concatenate(pieces, axis=0)
    return math.exp(float(ops.convert_to_numpy(next_token_loss(logits, ids, pad_id=pad_id))))
'''

# A while loop; each batch's next_token_loss weighed by its number of targets (ops).
PERPLEXITY_WEIGHTED = '''
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    start, weighted, targets = 0, 0.0, 0.0
    while start < len(token_ids):
        batch = token_ids[start:start + batch_size]
        count = float(ops.convert_to_numpy(
            ops.sum(ops.cast(ops.not_equal(batch[:, 1:], pad_id), "float32"))))
        if count > 0:
            loss = next_token_loss(model(batch, training=False), batch, pad_id)
            weighted += count * float(ops.convert_to_numpy(loss))
            targets += count
        start += batch_size
    return float(np.exp(weighted / targets))
'''

# Keras's per-token cross-entropy, the real targets' terms summed batch by batch.
PERPLEXITY_KERAS_TERMS = '''
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    ids = ops.convert_to_numpy(token_ids)
    sums, counts = [], []
    for first in range(0, len(ids), batch_size):
        rows = ids[first:first + batch_size]
        logits = model(rows, training=False)
        terms = keras.losses.sparse_categorical_crossentropy(rows[:, 1:], logits[:, :-1],
                                                             from_logits=True)
        real = rows[:, 1:] != pad_id
        sums.append(float(np.sum(ops.convert_to_numpy(terms)[real])))
        counts.append(int(real.sum()))
    return math.exp(sum(sums) / sum(counts))
'''

# --- top_k_filter --------------------------------------------------------------------

# np.partition finds the k-th largest without a full sort.
TOP_K_PARTITION = '''
def top_k_filter(logits, k):
    values = np.array(ops.convert_to_numpy(logits), dtype="float32")
    size = values.shape[-1]
    if k >= size:
        return values
    kth = np.partition(values, size - k, axis=-1)[..., size - k:size - k + 1]
    values[values < kth] = -np.inf
    return values
'''

# keras.ops.top_k's k-th value as the threshold; a tensor out.
TOP_K_OPS = '''
def top_k_filter(logits, k):
    logits = ops.convert_to_tensor(logits, dtype="float32")
    k = min(int(k), logits.shape[-1])
    largest, _ = ops.top_k(logits, k=k)  # sorted, largest first
    return ops.where(logits >= largest[..., -1:], logits, float("-inf"))
'''

# Row by row in Python, the threshold from sorted().
TOP_K_ROWS = '''
def top_k_filter(logits, k):
    array = np.asarray(ops.convert_to_numpy(logits), dtype=np.float32)
    rows = array.reshape(-1, array.shape[-1])
    out = np.full_like(rows, -np.inf)
    for r, row in enumerate(rows):
        threshold = sorted(row.tolist(), reverse=True)[min(k, len(row)) - 1]
        for j, value in enumerate(row):
            if value >= threshold:
                out[r, j] = value
    return out.reshape(array.shape)
'''

# A logit stays when fewer than k logits of its row are strictly larger; -1e9 elsewhere.
TOP_K_COUNT = '''
def top_k_filter(logits, k):
    values = np.asarray(ops.convert_to_numpy(logits), dtype="float32")
    larger = (values[..., None, :] > values[..., :, None]).sum(axis=-1)
    return np.where(larger < k, values, -1e9).astype("float32")
'''

# --- top_p_filter --------------------------------------------------------------------

# Sorted, cumulative sums shifted right by one (the total before each token), then
# put back with the inverse permutation.
TOP_P_SHIFT = '''
def top_p_filter(logits, p):
    z = np.asarray(ops.convert_to_numpy(logits), dtype=np.float64)
    probs = np.exp(z - z.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    order = np.argsort(-probs, axis=-1, kind="stable")
    cumulative = np.cumsum(np.take_along_axis(probs, order, axis=-1), axis=-1)
    first = np.ones_like(cumulative[..., :1], dtype=bool)
    keep_sorted = np.concatenate([first, cumulative[..., :-1] < p], axis=-1)
    keep = np.take_along_axis(keep_sorted, np.argsort(order, axis=-1), axis=-1)
    return np.where(keep, z, -np.inf).astype("float32")
'''

# Row by row: tokens taken most probable first until the total reaches p.
TOP_P_LOOP = '''
def top_p_filter(logits, p):
    values = np.asarray(ops.convert_to_numpy(logits), dtype=np.float32)
    flat = values.reshape(-1, values.shape[-1])
    out = np.full(flat.shape, -np.inf, dtype=np.float32)
    for r in range(len(flat)):
        e = np.exp(flat[r].astype(np.float64) - flat[r].max())
        probability = e / e.sum()
        total = 0.0
        for token in sorted(range(len(probability)), key=lambda t: (-probability[t], t)):
            out[r, token] = flat[r, token]
            total += probability[token]
            if total >= p:
                break
    return out.reshape(values.shape)
'''

# lexsort (probability, then id), searchsorted for the first rank whose running total
# reaches p, every rank up to it kept.
TOP_P_SEARCHSORTED = '''
def top_p_filter(logits, p):
    x = np.asarray(ops.convert_to_numpy(logits), "float32")
    shifted = x.astype("float64") - x.max(axis=-1, keepdims=True)
    probs = np.exp(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)))
    ids = np.broadcast_to(np.arange(x.shape[-1]), x.shape)
    order = np.lexsort((ids, -probs), axis=-1)
    cumulative = np.cumsum(np.take_along_axis(probs, order, axis=-1), axis=-1)
    rows = cumulative.reshape(-1, x.shape[-1])
    last = np.array([np.searchsorted(row, p) for row in rows]).reshape(x.shape[:-1])
    last = np.minimum(last, x.shape[-1] - 1)
    ranks = np.argsort(order, axis=-1)  # each token's place in the order
    return np.where(ranks <= last[..., None], x, -np.inf)
'''

# --- generate ------------------------------------------------------------------------

# A while loop over a Python list of tokens per row; rng.choice row by row.
GENERATE_LISTS = '''
def generate(model, prompt_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
             end_id=None, seed=None):
    rng = np.random.default_rng(seed)
    prompt = np.asarray(ops.convert_to_numpy(prompt_ids)).astype("int64")
    rows = [[int(t) for t in row] for row in prompt]
    alive = [True] * len(rows)
    logits, caches = model(prompt, return_cache=True, training=False)
    written = 0
    while written < max_new_tokens and any(alive):
        last = np.asarray(ops.convert_to_numpy(logits), dtype="float64")[:, -1]
        if temperature == 0:
            picks = last.argmax(axis=-1)
        else:
            z = last / temperature
            if top_k is not None:
                z = np.asarray(ops.convert_to_numpy(top_k_filter(z, top_k)), dtype="float64")
            if top_p is not None:
                z = np.asarray(ops.convert_to_numpy(top_p_filter(z, top_p)), dtype="float64")
            probabilities = np.exp(z - z.max(axis=-1, keepdims=True))
            probabilities /= probabilities.sum(axis=-1, keepdims=True)
            picks = [rng.choice(len(row), p=row) for row in probabilities]
        new = []
        for b, row in enumerate(rows):
            token = 0
            if alive[b]:
                token = int(picks[b])
                if end_id is not None and token == end_id:
                    alive[b] = False
            row.append(token)
            new.append(token)
        written += 1
        if written < max_new_tokens and any(alive):
            logits, caches = model(np.array(new)[:, None], cache=caches, return_cache=True,
                                   training=False)
    return np.array(rows)
'''

# Gumbel-max sampling (argmax of the scaled, filtered logits plus Gumbel noise); the
# model called after every new token, the last one included ("one call per new token").
GENERATE_GUMBEL = '''
def generate(model, prompt_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
             end_id=None, seed=None):
    generator = np.random.default_rng(seed)
    sequence = np.array(ops.convert_to_numpy(prompt_ids), dtype=np.int64)
    done = np.zeros(sequence.shape[0], dtype=bool)
    logits, caches = model(sequence, return_cache=True, training=False)
    for _ in range(max_new_tokens):
        scores = np.asarray(ops.convert_to_numpy(logits[:, -1, :]), dtype=np.float64)
        if temperature > 0:
            scores = scores / temperature
            if top_k is not None:
                scores = np.asarray(ops.convert_to_numpy(top_k_filter(scores, top_k)),
                                    dtype=np.float64)
            if top_p is not None:
                scores = np.asarray(ops.convert_to_numpy(top_p_filter(scores, top_p)),
                                    dtype=np.float64)
            scores = scores + generator.gumbel(size=scores.shape)
        token = np.where(done, 0, np.argmax(scores, axis=-1))
        sequence = np.concatenate([sequence, token[:, None]], axis=1)
        if end_id is not None:
            done = done | (token == end_id)
        if done.all():
            break
        logits, caches = model(token[:, None], cache=caches, return_cache=True, training=False)
    return sequence
'''

# The columns kept in a list; keras.ops.argmax for greedy; inverse-CDF draws.
GENERATE_COLUMNS = '''
def generate(model, prompt_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
             end_id=None, seed=None):
    rng = np.random.default_rng(seed)
    prompt = ops.convert_to_numpy(prompt_ids).astype("int32")
    columns = [prompt]
    finished = np.zeros(prompt.shape[0], bool)
    out, state = model(prompt, return_cache=True, training=False)
    for i in range(max_new_tokens):
        last = out[:, -1]
        if not temperature:
            token = ops.convert_to_numpy(ops.argmax(last, axis=-1))
        else:
            z = ops.convert_to_numpy(last).astype("float64") / temperature
            if top_k is not None:
                z = top_k_filter(z, top_k)
            if top_p is not None:
                z = top_p_filter(z, top_p)
            z = np.asarray(ops.convert_to_numpy(z), "float64")
            cdf = np.cumsum(np.exp(z - z.max(axis=-1, keepdims=True)), axis=-1)
            cdf /= cdf[:, -1:]
            u = rng.random(len(cdf))
            token = np.array([min(np.searchsorted(row, v, side="right"), len(row) - 1)
                              for row, v in zip(cdf, u)])
        token = np.where(finished, 0, token).astype("int32")
        columns.append(token[:, None])
        if end_id is not None:
            finished = finished | (token == end_id)
        if finished.all() or i == max_new_tokens - 1:
            break
        out, state = model(token[:, None], cache=state, return_cache=True, training=False)
    return np.concatenate(columns, axis=1)
'''

VARIANTS = {
    "RotaryEmbedding": [ROTARY_COMPLEX, ROTARY_INTERLEAVE, ROTARY_TABLES, ROTARY_MATRIX,
                        ROTARY_FLOAT32],
    "DecoderOnlyBlock": [BLOCK_EINSUM, BLOCK_NEG_INF, BLOCK_BUILD, BLOCK_HEAD_LOOP,
                         BLOCK_FUSED],
    "MiniGPT": [MINIGPT_EINSUM, MINIGPT_BUILD, MINIGPT_ONLY_WHEN_ASKED],
    "next_token_loss": [LOSS_LOG_SOFTMAX, LOSS_ONE_HOT, LOSS_LOGSUMEXP, LOSS_OBJECT_SUM],
    "perplexity": [PERPLEXITY_NUMPY, PERPLEXITY_ALL_LOGITS, PERPLEXITY_WEIGHTED,
                   PERPLEXITY_KERAS_TERMS],
    "top_k_filter": [TOP_K_PARTITION, TOP_K_OPS, TOP_K_ROWS, TOP_K_COUNT],
    "top_p_filter": [TOP_P_SHIFT, TOP_P_LOOP, TOP_P_SEARCHSORTED],
    "generate": [GENERATE_LISTS, GENERATE_GUMBEL, GENERATE_COLUMNS],
}

# --- the mistakes ----------------------------------------------------------------------

_TABLES_TURN = "ops.stack([first * cos - second * sin, second * cos + first * sin], axis=-1)"

_NEG_INF_MASK = "bias = np.where(key_at <= query_at, 0.0, -np.inf).astype(\"float32\")"
_NEG_INF_ROTATE = '''        q = self.rotary(q, start=offset)
        k = self.rotary(k, start=offset)
        if cache is not None:
            k = ops.concatenate([ops.cast(cached_keys, k.dtype), k], axis=2)
            v = ops.concatenate([ops.cast(cached_values, v.dtype), v], axis=2)
'''
_NEG_INF_RESIDUALS = '''        h = ops.add(x, self.output_dense(attended))
        out = h + self.ffn(self.norm2(h))
'''

_EINSUM_OUTPUT = '''        logits = ops.einsum("btd,vd->btv", hidden, self.token_embedding.embeddings)
'''
_EINSUM_BLOCKS = '''        for block, past in zip(self.blocks, pasts):
            hidden, kv = block(hidden, cache=past, return_cache=True)
'''

_LOSS_BASE = LOSS_LOG_SOFTMAX

# The loss computed in NumPy: right values, but nothing for model.fit to differentiate.
_NUMPY_LOSS = '''
def next_token_loss(logits, token_ids, pad_id=0):
    z = np.asarray(ops.convert_to_numpy(logits), dtype="float64")[:, :-1]
    targets = np.asarray(ops.convert_to_numpy(token_ids)).astype("int64")[:, 1:]
    z = z - z.max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    real = targets != pad_id
    return float(-picked[real].mean())
'''

_PERPLEXITY_BASE = '''
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    ids = np.asarray(ops.convert_to_numpy(token_ids))
    total, count = 0.0, 0
    for first in range(0, len(ids), batch_size):
        batch = ids[first:first + batch_size]
        targets = int(np.sum(batch[:, 1:] != pad_id))
        if targets == 0:
            continue
        logits = model(batch, training=False)
        loss = float(ops.convert_to_numpy(next_token_loss(logits, batch, pad_id=pad_id)))
        total += loss * targets
        count += targets
    return math.exp(total / count)
'''

_TOP_P_BASE = '''
def top_p_filter(logits, p):
    z = np.asarray(ops.convert_to_numpy(logits), dtype=np.float64)
    probs = np.exp(z - z.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    order = np.argsort(-probs, axis=-1, kind="stable")
    ranked = np.take_along_axis(probs, order, axis=-1)
    keep_sorted = np.cumsum(ranked, axis=-1) - ranked < p
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, z, -np.inf).astype("float32")
'''

_GENERATE_BASE = '''
def generate(model, prompt_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
             end_id=None, seed=None):
    tokens = np.asarray(ops.convert_to_numpy(prompt_ids)).astype("int64")
    rng = np.random.default_rng(seed)
    finished = np.zeros(len(tokens), dtype=bool)
    logits, caches = model(tokens, return_cache=True, training=False)
    for step in range(max_new_tokens):
        z = np.asarray(ops.convert_to_numpy(logits), dtype="float64")[:, -1, :]
        if temperature == 0:
            chosen = z.argmax(axis=-1)
        else:
            z = z / temperature
            if top_k is not None:
                z = np.asarray(top_k_filter(z, top_k), dtype="float64")
            if top_p is not None:
                z = np.asarray(top_p_filter(z, top_p), dtype="float64")
            probabilities = np.exp(z - z.max(axis=-1, keepdims=True))
            probabilities /= probabilities.sum(axis=-1, keepdims=True)
            u = rng.random(len(tokens))[:, None]
            chosen = (np.cumsum(probabilities, axis=-1) < u).sum(axis=-1)
        chosen = np.where(finished, 0, np.minimum(chosen, z.shape[-1] - 1))
        tokens = np.concatenate([tokens, chosen[:, None]], axis=1)
        if end_id is not None:
            finished |= chosen == end_id
            if finished.all():
                break
        if step + 1 < max_new_tokens:
            logits, caches = model(chosen[:, None], cache=caches, return_cache=True,
                                   training=False)
    return tokens
'''
_GENERATE_FILTERS = '''            z = z / temperature
            if top_k is not None:
                z = np.asarray(top_k_filter(z, top_k), dtype="float64")
            if top_p is not None:
                z = np.asarray(top_p_filter(z, top_p), dtype="float64")
'''
_GENERATE_NEXT_CALL = '''            logits, caches = model(chosen[:, None], cache=caches, return_cache=True,
                                   training=False)
'''

MISTAKES = [
    # --- RotaryEmbedding
    Mistake("RotaryEmbedding", "clockwise",
            "turns each pair clockwise: (x0 cos + x1 sin, x1 cos - x0 sin)",
            swap(ROTARY_TABLES, _TABLES_TURN,
                  "ops.stack([first * cos + second * sin, second * cos - first * sin], axis=-1)"),
            fails=("test_RotaryEmbedding",)),
    # The two halves: GPT-NeoX's rotate_half and keras-hub's RotaryEmbedding; named by the
    # visible check and the hidden feedback; the positions from start right, so it loses
    # the values' share only.
    Mistake("RotaryEmbedding", "halves",
            "pairs feature i with feature i + head_dim/2 (the two halves, GPT-NeoX's and "
            "keras-hub's layout), not consecutive features",
            _ROTARY_INIT + '''
    def call(self, x, start=0):
        x = ops.convert_to_tensor(x)
        half = self.head_dim // 2
        positions = ops.cast(ops.arange(ops.shape(x)[-2]) + start, "float32")
        theta = ops.power(float(self.base), -ops.arange(0, self.head_dim, 2, dtype="float32")
                          / self.head_dim)
        angles = ops.concatenate([positions[:, None] * theta[None, :]] * 2, axis=-1)
        rotated_half = ops.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * ops.cos(angles) + rotated_half * ops.sin(angles)
''' + _ROTARY_CONFIG,
            fails=("test_RotaryEmbedding",)),
    Mistake("RotaryEmbedding", "start-ignored",
            "the positions are always 0 .. T-1: start is never used",
            swap(ROTARY_INTERLEAVE, "steps = ops.arange(start, start + n, dtype=\"float32\")",
                  "steps = ops.arange(0, n, dtype=\"float32\")"),
            fails=("test_RotaryEmbedding__start",)),
    Mistake("RotaryEmbedding", "frequency-exponent-i",
            "theta_i = base ** (-i / head_dim) with i the pair's index: the factor 2 lost",
            swap(ROTARY_MATRIX,
                  "-2.0 * ops.arange(half, dtype=\"float32\") / self.head_dim)",
                  "-ops.arange(half, dtype=\"float32\") / self.head_dim)")),
    Mistake("RotaryEmbedding", "positions-from-one",
            "the first row is position start + 1: arange(1, T + 1)",
            swap(ROTARY_MATRIX, "ops.cast(ops.arange(length) + start, \"float32\")",
                  "ops.cast(ops.arange(1, length + 1) + start, \"float32\")")),
    Mistake("RotaryEmbedding", "length-from-axis-2",
            "reads T as axis 2 (the model's (B, H, T, D) only), not the second-to-last axis",
            swap(ROTARY_TABLES, "length = ops.shape(x)[-2]", "length = ops.shape(x)[2]")),
    Mistake("RotaryEmbedding", "config-without-base",
            "get_config holds head_dim but not base",
            swap(ROTARY_MATRIX, "config.update(head_dim=self.head_dim, base=self.base)",
                  "config.update(head_dim=self.head_dim)"),
            fails=("test_RotaryEmbedding__config",)),

    # --- DecoderOnlyBlock
    Mistake("DecoderOnlyBlock", "no-mask",
            "no causal mask: every query sees every key, the later ones too",
            swap(BLOCK_NEG_INF, " * (self.head_dim ** -0.5) + bias", " * (self.head_dim ** -0.5)")),
    Mistake("DecoderOnlyBlock", "strictly-before",
            "key position < query position: a token does not see itself",
            swap(BLOCK_NEG_INF, _NEG_INF_MASK, _NEG_INF_MASK.replace("<=", "<"))),
    Mistake("DecoderOnlyBlock", "tril-for-triu",
            "ops.tril where ops.triu is meant: hides the past and the position itself, shows "
            "the future",
            swap(BLOCK_EINSUM, "ops.triu(ops.ones((length, past + length)), k=past + 1)",
                  "ops.tril(ops.ones((length, past + length)), k=past)")),
    Mistake("DecoderOnlyBlock", "future-visible",
            "the mask the wrong way round: the query sees the keys at and after its position",
            swap(BLOCK_NEG_INF, _NEG_INF_MASK, _NEG_INF_MASK.replace("key_at <= query_at",
                                                                     "key_at >= query_at"))),
    Mistake("DecoderOnlyBlock", "post-norm",
            "lab 4's post-norm: norm1(x + attention(x)), norm2(h + ffn(h))",
            swap(swap(BLOCK_NEG_INF, "normed = self.norm1(x)", "normed = x"),
                  _NEG_INF_RESIDUALS, '''        h = self.norm1(ops.add(x, self.output_dense(attended)))
        out = self.norm2(h + self.ffn(h))
''')),
    Mistake("DecoderOnlyBlock", "values-rotated",
            "rotates v as well as q and k",
            swap(BLOCK_NEG_INF, "        k = self.rotary(k, start=offset)\n",
                  "        k = self.rotary(k, start=offset)\n"
                  "        v = self.rotary(v, start=offset)\n")),
    Mistake("DecoderOnlyBlock", "no-scaling",
            "the scores q k^T are not divided by sqrt(head_dim)",
            swap(BLOCK_NEG_INF, " * (self.head_dim ** -0.5) + bias", " + bias")),
    Mistake("DecoderOnlyBlock", "scaled-by-d-model",
            "the scores divided by sqrt(d_model) instead of sqrt(head_dim)",
            swap(BLOCK_NEG_INF, " * (self.head_dim ** -0.5) + bias",
                  " * (self.d_model ** -0.5) + bias")),
    Mistake("DecoderOnlyBlock", "norm-epsilon-default",
            "LayerNormalization() with Keras's default epsilon (1e-3), not epsilon=1e-6",
            swap(BLOCK_EINSUM,
                  "self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)",
                  "self.norm1 = keras.layers.LayerNormalization()",
                  "self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)",
                  "self.norm2 = keras.layers.LayerNormalization()")),
    Mistake("DecoderOnlyBlock", "softmax-over-queries",
            "the softmax over the queries' axis instead of the keys'",
            swap(BLOCK_NEG_INF, "ops.softmax(scores, axis=-1)", "ops.softmax(scores, axis=-2)")),
    # the cache (its own tests cell)
    Mistake("DecoderOnlyBlock", "cache-start-minus-one",
            "after a cache of P positions the new ones are rotated from P - 1",
            swap(BLOCK_NEG_INF, "offset = int(cached_keys.shape[2])",
                  "offset = int(cached_keys.shape[2]) - 1"),
            fails=("test_DecoderOnlyBlock__cache",)),
    Mistake("DecoderOnlyBlock", "cache-start-plus-one",
            "after a cache of P positions the new ones are rotated from P + 1",
            swap(BLOCK_HEAD_LOOP, "start = 0 if cache is None else int(ops.shape(cache[0])[2])",
                  "start = 0 if cache is None else int(ops.shape(cache[0])[2]) + 1"),
            fails=("test_DecoderOnlyBlock__cache",)),
    Mistake("DecoderOnlyBlock", "cache-keys-unrotated",
            "caches the keys before the rotation and rotates all of them from 0 at each call",
            swap(BLOCK_NEG_INF, _NEG_INF_ROTATE, '''        q = self.rotary(q, start=offset)
        if cache is not None:
            k = ops.concatenate([ops.cast(cached_keys, k.dtype), k], axis=2)
            v = ops.concatenate([ops.cast(cached_values, v.dtype), v], axis=2)
        unrotated = k
        k = self.rotary(k)
''').replace("return (out, (k, v)) if return_cache else out",
             "return (out, (unrotated, v)) if return_cache else out"),
            fails=("test_DecoderOnlyBlock__cache",)),
    Mistake("DecoderOnlyBlock", "cache-new-keys-only",
            "returns the keys and values of the new positions only, not of all P + T",
            swap(BLOCK_NEG_INF, _NEG_INF_ROTATE, '''        q = self.rotary(q, start=offset)
        k = self.rotary(k, start=offset)
        new_keys, new_values = k, v
        if cache is not None:
            k = ops.concatenate([ops.cast(cached_keys, k.dtype), k], axis=2)
            v = ops.concatenate([ops.cast(cached_values, v.dtype), v], axis=2)
''').replace("return (out, (k, v)) if return_cache else out",
             "return (out, (new_keys, new_values)) if return_cache else out"),
            fails=("test_DecoderOnlyBlock__cache",)),
    Mistake("DecoderOnlyBlock", "mask-not-shifted",
            "the mask ignores the cache: the new query t sees the keys 0 .. t, not 0 .. P + t",
            swap(BLOCK_NEG_INF, "query_at = offset + np.arange(new)[:, None]",
                  "query_at = np.arange(new)[:, None]"),
            fails=("test_DecoderOnlyBlock__cache",)),
    Mistake("DecoderOnlyBlock", "cache-after-new",
            "puts the cached keys and values after the new ones",
            swap(BLOCK_EINSUM, '''            k = ops.concatenate([ops.convert_to_tensor(cache[0], dtype=k.dtype), k], axis=2)
            v = ops.concatenate([ops.convert_to_tensor(cache[1], dtype=v.dtype), v], axis=2)
''', '''            k = ops.concatenate([k, ops.convert_to_tensor(cache[0], dtype=k.dtype)], axis=2)
            v = ops.concatenate([v, ops.convert_to_tensor(cache[1], dtype=v.dtype)], axis=2)
'''),
            fails=("test_DecoderOnlyBlock__cache",)),
    Mistake("DecoderOnlyBlock", "config-without-dff",
            "get_config holds d_model and num_heads but not dff",
            swap(BLOCK_EINSUM, '''"num_heads": self.num_heads, "dff": self.dff})''',
                  '''"num_heads": self.num_heads})'''),
            fails=("test_DecoderOnlyBlock__config",)),

    # --- MiniGPT
    Mistake("MiniGPT", "untied-output",
            "an output Dense(vocab_size) of its own instead of the embedding's table",
            swap(swap(MINIGPT_EINSUM,
                        "        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)\n",
                        "        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)\n"
                        "        self.output_layer = keras.layers.Dense(vocab_size)\n"),
                  _EINSUM_OUTPUT, "        logits = self.output_layer(hidden)\n")),
    Mistake("MiniGPT", "no-final-norm",
            "no final LayerNormalization: the logits come from the blocks' raw output",
            swap(swap(MINIGPT_EINSUM,
                        "        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)\n",
                        ""),
                  "        hidden = self.final_norm(hidden)\n", "")),
    Mistake("MiniGPT", "one-block-shared",
            "[DecoderOnlyBlock(...)] * num_layers: one block (one set of weights) used num_layers "
            "times",
            swap(MINIGPT_ONLY_WHEN_ASKED, '''        self.blocks = [DecoderOnlyBlock(d_model=d_model, num_heads=num_heads, dff=dff)
                       for _ in range(num_layers)]''',
                  '''        self.blocks = [DecoderOnlyBlock(d_model=d_model, num_heads=num_heads,
                                        dff=dff)] * num_layers''')),
    Mistake("MiniGPT", "embedding-scaled",
            "scales the token vectors by sqrt(d_model), lab 5's habit",
            swap(MINIGPT_EINSUM, "hidden = self.token_embedding(token_ids)",
                  "hidden = self.token_embedding(token_ids) * math.sqrt(self.d_model)")),
    Mistake("MiniGPT", "final-norm-epsilon-default",
            "final_norm is LayerNormalization() with Keras's default epsilon (1e-3)",
            swap(MINIGPT_EINSUM, "self.final_norm = keras.layers.LayerNormalization(epsilon=1e-6)",
                  "self.final_norm = keras.layers.LayerNormalization()")),
    Mistake("MiniGPT", "position-vector-added",
            "adds lab 3's sinusoidal position vectors to the token vectors (the blocks rotate "
            "by position: no position vector)",
            swap(MINIGPT_EINSUM, "        hidden = self.token_embedding(token_ids)\n",
                  """        hidden = self.token_embedding(token_ids)
        length = int(ops.shape(token_ids)[1])
        angles = np.arange(length)[:, None] / 10000.0 ** (
            np.arange(0, self.d_model, 2)[None, :] / self.d_model)
        table = np.zeros((length, self.d_model), "float32")
        table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
        hidden = hidden + table
""")),
    Mistake("MiniGPT", "softmax-output",
            "returns the softmax of the logits (probabilities)",
            swap(MINIGPT_EINSUM, _EINSUM_OUTPUT,
                  _EINSUM_OUTPUT + "        logits = ops.softmax(logits, axis=-1)\n")),
    # the cache and the config (their own tests cells)
    Mistake("MiniGPT", "whole-cache-to-each-block",
            "gives every block the whole list of caches, not its own cache[i]",
            swap(MINIGPT_ONLY_WHEN_ASKED,
                  "block_cache = cache[index] if cache is not None else None",
                  "block_cache = cache"),
            fails=("test_MiniGPT__cache",)),
    Mistake("MiniGPT", "first-cache-for-all",
            "gives every block the first block's cache",
            swap(MINIGPT_BUILD, "cache=cache[i] if cache is not None else None",
                  "cache=cache[0] if cache is not None else None"),
            fails=("test_MiniGPT__cache",)),
    Mistake("MiniGPT", "last-cache-only",
            "returns the last block's cache alone, not one per block",
            swap(swap(MINIGPT_EINSUM, "            new_caches.append(kv)\n",
                        "            new_caches = kv\n"),
                  "        new_caches = []\n", "")),
    Mistake("MiniGPT", "no-get-config",
            "no get_config at all: a keras.Model cannot build its config (NotImplementedError)",
            swap(MINIGPT_EINSUM, _MINIGPT_CONFIG, "\n"),
            fails=("test_MiniGPT__config",)),
    Mistake("MiniGPT", "config-without-num-heads",
            "get_config forgets num_heads",
            swap(MINIGPT_BUILD, '''"d_model": self.d_model,
                "num_heads": self.num_heads, "dff": self.dff}''',
                  '''"d_model": self.d_model,
                "dff": self.dff}'''),
            fails=("test_MiniGPT__config",)),

    # --- next_token_loss
    Mistake("next_token_loss", "no-shift",
            "compares the logits at t with the token at t",
            '''
def next_token_loss(logits, token_ids, pad_id=0):
    per_token = keras.losses.sparse_categorical_crossentropy(token_ids, logits, from_logits=True)
    mask = ops.cast(ops.not_equal(token_ids, pad_id), per_token.dtype)
    return ops.sum(per_token * mask) / ops.sum(mask)
'''),
    Mistake("next_token_loss", "shift-backwards",
            "compares logits[:, 1:] with token_ids[:, :-1]",
            swap(swap(_LOSS_BASE, "[:, :-1], axis=-1)", "[:, 1:], axis=-1)"),
                  "ops.convert_to_tensor(token_ids)[:, 1:]",
                  "ops.convert_to_tensor(token_ids)[:, :-1]")),
    Mistake("next_token_loss", "padding-counted",
            "the mean over every target, padding included",
            '''
def next_token_loss(logits, token_ids, pad_id=0):
    return ops.mean(keras.losses.sparse_categorical_crossentropy(
        token_ids[:, 1:], logits[:, :-1], from_logits=True))
'''),
    Mistake("next_token_loss", "mean-per-sentence",
            "averages each sentence's real targets, then the sentences",
            swap(_LOSS_BASE, "return -ops.sum(picked * real) / ops.sum(real)",
                  "return ops.mean(-ops.sum(picked * real, axis=1) / ops.sum(real, axis=1))")),
    Mistake("next_token_loss", "pad-id-ignored",
            "masks the id 0 whatever pad_id says",
            swap(_LOSS_BASE, "real = ops.cast(targets != pad_id, picked.dtype)",
                  "real = ops.cast(targets != 0, picked.dtype)")),
    Mistake("next_token_loss", "mask-of-inputs",
            "leaves out the positions whose INPUT token is padding, not those whose target is",
            swap(_LOSS_BASE, "real = ops.cast(targets != pad_id, picked.dtype)",
                  "real = ops.cast(ops.convert_to_tensor(token_ids)[:, :-1] != pad_id, "
                  "picked.dtype)")),
    Mistake("next_token_loss", "probabilities-assumed",
            "from_logits=False: the raw logits taken for probabilities",
            '''
def next_token_loss(logits, token_ids, pad_id=0):
    targets = token_ids[:, 1:]
    per_token = keras.losses.sparse_categorical_crossentropy(targets, logits[:, :-1, :])
    mask = ops.cast(ops.not_equal(targets, pad_id), per_token.dtype)
    return ops.sum(per_token * mask) / ops.sum(mask)
'''),
    Mistake("next_token_loss", "divides-by-all",
            "masks the terms but divides by every position, B * (T - 1)",
            swap(_LOSS_BASE, "return -ops.sum(picked * real) / ops.sum(real)",
                  "return -ops.mean(picked * real)")),
    # differentiable (its own tests cell): the right value, but no gradient for fit
    Mistake("next_token_loss", "numpy-loss",
            "computed in NumPy and returned as a float: the right value, no gradient",
            _NUMPY_LOSS,
            fails=("test_next_token_loss__differentiable",)),
    Mistake("next_token_loss", "numpy-then-tensor",
            "computed in NumPy, then turned back into a tensor: no gradient reaches the "
            "logits",
            swap(_NUMPY_LOSS, "return float(-picked[real].mean())",
                  "return ops.convert_to_tensor(-picked[real].mean(), dtype=\"float32\")"),
            fails=("test_next_token_loss__differentiable",)),

    # --- perplexity
    Mistake("perplexity", "mean-of-batch-means",
            "exp of the mean of the batches' losses: every batch weighs the same",
            swap(swap(_PERPLEXITY_BASE, "total += loss * targets", "total += loss"),
                  "count += targets", "count += 1")),
    Mistake("perplexity", "exp-per-batch",
            "the mean of the batches' perplexities, exp taken batch by batch",
            swap(swap(swap(_PERPLEXITY_BASE, "total += loss * targets",
                              "total += math.exp(loss)"),
                        "count += targets", "count += 1"),
                  "return math.exp(total / count)", "return total / count")),
    Mistake("perplexity", "padding-counted",
            "counts every target, padding included, in NumPy",
            '''
def perplexity(model, token_ids, batch_size=64, pad_id=0):
    ids = np.asarray(ops.convert_to_numpy(token_ids))
    nll = []
    for i in range(0, len(ids), batch_size):
        chunk = ids[i:i + batch_size]
        z = np.asarray(ops.convert_to_numpy(model(chunk, training=False)), "float64")[:, :-1]
        z = z - z.max(axis=-1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        nll.extend(-np.take_along_axis(log_p, chunk[:, 1:, None], axis=-1).ravel())
    return float(np.exp(np.mean(nll)))
'''),
    Mistake("perplexity", "pad-id-ignored",
            "next_token_loss called without pad_id (0 always) and targets counted against 0",
            swap(swap(_PERPLEXITY_BASE, "targets = int(np.sum(batch[:, 1:] != pad_id))",
                        "targets = int(np.sum(batch[:, 1:] != 0))"),
                  "next_token_loss(logits, batch, pad_id=pad_id)",
                  "next_token_loss(logits, batch)")),
    Mistake("perplexity", "last-batch-dropped",
            "only whole batches: the rows after the last full batch are left out",
            swap(_PERPLEXITY_BASE, "range(0, len(ids), batch_size)",
                  "range(0, len(ids) - batch_size + 1, batch_size)")),
    Mistake("perplexity", "loss-returned",
            "returns the mean cross-entropy, not its exponential",
            swap(_PERPLEXITY_BASE, "return math.exp(total / count)", "return total / count")),
    Mistake("perplexity", "weighed-by-rows",
            "weighs each batch's loss by its rows times T - 1, not by its real targets",
            swap(_PERPLEXITY_BASE, "targets = int(np.sum(batch[:, 1:] != pad_id))",
                  "targets = batch[:, 1:].size")),

    # --- top_k_filter
    Mistake("top_k_filter", "ties-dropped",
            "keeps exactly k logits, the first k of argsort: a tie with the k-th is removed",
            '''
def top_k_filter(logits, k):
    values = np.asarray(ops.convert_to_numpy(logits), dtype="float32")
    best = np.argsort(-values, axis=-1, kind="stable")[..., :k]
    keep = np.zeros(values.shape, dtype=bool)
    np.put_along_axis(keep, best, True, axis=-1)
    return np.where(keep, values, -np.inf).astype("float32")
'''),
    Mistake("top_k_filter", "strictly-larger",
            "keeps the logits strictly larger than the k-th largest: k - 1 of them",
            swap(TOP_K_OPS, "logits >= largest[..., -1:]", "logits > largest[..., -1:]")),
    Mistake("top_k_filter", "k-smallest",
            "keeps the k smallest logits",
            swap(TOP_K_ROWS, "sorted(row.tolist(), reverse=True)", "sorted(row.tolist())")
            .replace("if value >= threshold:", "if value <= threshold:")),
    Mistake("top_k_filter", "k-not-clamped",
            "indexes the sorted row at -k without clamping k to V: k > V raises",
            '''
def top_k_filter(logits, k):
    values = np.asarray(ops.convert_to_numpy(logits), dtype="float32")
    kth = np.sort(values, axis=-1)[..., -k][..., None]
    return np.where(values >= kth, values, -np.inf).astype("float32")
'''),
    Mistake("top_k_filter", "zeros-not-minus-inf",
            "sets the removed logits to 0 instead of -inf: they keep their probability",
            swap(TOP_K_PARTITION, "values[values < kth] = -np.inf", "values[values < kth] = 0.0")),
    Mistake("top_k_filter", "batch-threshold",
            "one threshold for the whole batch (the k-th largest of all the logits)",
            '''
def top_k_filter(logits, k):
    values = np.asarray(ops.convert_to_numpy(logits), dtype="float32")
    kth = np.sort(values.ravel())[-min(k, values.shape[-1])]
    return np.where(values >= kth, values, -np.inf).astype("float32")
'''),

    # --- top_p_filter
    Mistake("top_p_filter", "crossing-dropped",
            "keeps the tokens whose running total, their own included, is below p: the "
            "crossing token removed (the most probable kept)",
            swap(_TOP_P_BASE, "keep_sorted = np.cumsum(ranked, axis=-1) - ranked < p",
                  "keep_sorted = np.cumsum(ranked, axis=-1) < p\n"
                  "    keep_sorted[..., 0] = True")),
    Mistake("top_p_filter", "cumsum-at-most-p",
            "keeps the tokens whose running total is at most p: the crossing token removed, "
            "and nothing left when the most probable alone passes p",
            swap(_TOP_P_BASE, "keep_sorted = np.cumsum(ranked, axis=-1) - ranked < p",
                  "keep_sorted = np.cumsum(ranked, axis=-1) <= p")),
    Mistake("top_p_filter", "unsorted",
            "running totals in the ids' order, never sorted by probability",
            '''
def top_p_filter(logits, p):
    z = np.asarray(ops.convert_to_numpy(logits), dtype=np.float64)
    probs = np.exp(z - z.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    keep = np.cumsum(probs, axis=-1) - probs < p
    return np.where(keep, z, -np.inf).astype("float32")
'''),
    Mistake("top_p_filter", "least-probable-first",
            "sorts the probabilities in increasing order",
            swap(_TOP_P_BASE, "order = np.argsort(-probs, axis=-1, kind=\"stable\")",
                  "order = np.argsort(probs, axis=-1, kind=\"stable\")")),
    Mistake("top_p_filter", "not-normalised",
            "exp(logits) as the probabilities, never divided by their sum",
            swap(_TOP_P_BASE, "    probs /= probs.sum(axis=-1, keepdims=True)\n", "")
            .replace("probs = np.exp(z - z.max(axis=-1, keepdims=True))", "probs = np.exp(z)")),
    Mistake("top_p_filter", "mask-not-unsorted",
            "the mask found in sorted order applied to the ids' order as it is",
            swap(_TOP_P_BASE, '''    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
''', '''    keep = keep_sorted
''')),
    Mistake("top_p_filter", "ties-higher-id-first",
            "sorts upwards and reverses: equal probabilities come the higher id first",
            swap(_TOP_P_BASE, "order = np.argsort(-probs, axis=-1, kind=\"stable\")",
                  "order = np.argsort(probs, axis=-1, kind=\"stable\")[..., ::-1]")),

    # --- generate
    Mistake("generate", "no-cache",
            "recomputes the whole prefix at every step, never passing the cache",
            swap(_GENERATE_BASE, _GENERATE_NEXT_CALL, '''            logits = model(tokens, training=False)
'''),
            fails=("test_generate__cache",)),
    Mistake("generate", "whole-sequence-with-cache",
            "feeds the whole sequence so far with the cache, not the new token alone",
            swap(_GENERATE_BASE, "logits, caches = model(chosen[:, None], cache=caches,",
                  "logits, caches = model(tokens, cache=caches,")),
    Mistake("generate", "first-position",
            "chooses from the logits at the first position, not the last",
            swap(_GENERATE_BASE, 'dtype="float64")[:, -1, :]', 'dtype="float64")[:, 0, :]')),
    Mistake("generate", "writes-after-end",
            "a row that wrote end_id goes on writing tokens (no 0 after it)",
            swap(_GENERATE_BASE, "chosen = np.where(finished, 0, np.minimum(chosen, z.shape[-1] - 1))",
                  "chosen = np.minimum(chosen, z.shape[-1] - 1)")),
    Mistake("generate", "stops-at-first-end",
            "stops the whole batch as soon as one row writes end_id",
            swap(_GENERATE_BASE, "if finished.all():", "if finished.any():")),
    # sampling (its own tests cell)
    Mistake("generate", "filters-before-temperature",
            "top-k and top-p applied to the raw logits, the temperature after",
            swap(_GENERATE_BASE, _GENERATE_FILTERS, '''            if top_k is not None:
                z = np.asarray(top_k_filter(z, top_k), dtype="float64")
            if top_p is not None:
                z = np.asarray(top_p_filter(z, top_p), dtype="float64")
            z = z / temperature
'''),
            fails=("test_generate__sampling",)),
    Mistake("generate", "top-p-before-top-k",
            "top-p first, then top-k",
            swap(_GENERATE_BASE, _GENERATE_FILTERS, '''            z = z / temperature
            if top_p is not None:
                z = np.asarray(top_p_filter(z, top_p), dtype="float64")
            if top_k is not None:
                z = np.asarray(top_k_filter(z, top_k), dtype="float64")
'''),
            fails=("test_generate__sampling",)),
    Mistake("generate", "temperature-ignored",
            "samples from softmax(logits): the temperature only switches greedy off",
            swap(_GENERATE_BASE, "            z = z / temperature\n", ""),
            fails=("test_generate__sampling",)),
    Mistake("generate", "seed-ignored",
            "np.random.default_rng() without the seed: a seed does not repeat the tokens",
            swap(_GENERATE_BASE, "rng = np.random.default_rng(seed)", "rng = np.random.default_rng()"),
            fails=("test_generate__sampling",)),
    Mistake("generate", "generator-per-step",
            "a new np.random.default_rng(seed) at every step: the same draws at each step",
            swap(swap(_GENERATE_BASE, "    rng = np.random.default_rng(seed)\n", ""),
                  "            u = rng.random(len(tokens))[:, None]\n",
                  "            rng = np.random.default_rng(seed)\n"
                  "            u = rng.random(len(tokens))[:, None]\n"),
            fails=("test_generate__sampling",)),
]

#: Mistakes that the visible check of their exercise may let through, with the
#: reason. None: every mistake above fails its visible check too.
HIDDEN_ONLY: dict[str, str] = {}

# Issue 47: each rule its own share. Every mistake above without `fails` loses its
# exercise's main tests cell and no other (the cache cells judge a block or model
# against itself where its values are wrong); these break more than one rule.
_BLOCK_MASK = ("test_DecoderOnlyBlock", "test_DecoderOnlyBlock__causal")
_GENERATE = ("test_generate", "test_generate__cache", "test_generate__sampling")
MISTAKES = own_share(MISTAKES, {
    # Which keys a query sees: the values and the causal property both.
    ("DecoderOnlyBlock", "no-mask"): _BLOCK_MASK,
    ("DecoderOnlyBlock", "strictly-before"): _BLOCK_MASK,
    ("DecoderOnlyBlock", "tril-for-triu"): _BLOCK_MASK,
    ("DecoderOnlyBlock", "future-visible"): _BLOCK_MASK,
    # Normalised over the queries: later queries change earlier outputs, and a cached
    # step normalises over one query.
    ("DecoderOnlyBlock", "softmax-over-queries"): _BLOCK_MASK + ("test_DecoderOnlyBlock__cache",),
    # The vector of position 0 is added to every cached step as well.
    ("MiniGPT", "position-vector-added"): ("test_MiniGPT", "test_MiniGPT__cache"),
    # Only the cache is wrong: the cache cell's share.
    ("MiniGPT", "last-cache-only"): ("test_MiniGPT__cache",),
    # Every generated token is wrong, greedy or sampled, cached or not.
    ("generate", "whole-sequence-with-cache"): _GENERATE,
    ("generate", "first-position"): _GENERATE,
})
