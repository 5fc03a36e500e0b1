"""What the grader must not believe of the student's kernel: forged class paths, weights read back, a wrapper of Keras's layer (issue 18: 2, 3)."""

from __future__ import annotations

from pathlib import Path

from tests.hostile.cases import SAMPLES, Case, lab_notebook

#: lab2's MultiHeadAttention as a wrapper of Keras's own layer: every number
#: right, nothing written from scratch (grace's mistake in the lab2 samples).
KERAS_MHA_WRAPPER = SAMPLES.LAB2_MISTAKES["mha_wraps_keras"].source

#: Keras's class made to look like the notebook's own (its path under __main__).
FORGED_MODULE = '''
keras.layers.MultiHeadAttention.__module__ = "__main__"
'''

#: A thread that finds the probe's handler in builtins and rewrites its
#: answers to `describe` requests: no class path that names attention.
DESCRIBE_FORGER = '''
import builtins, json, threading, time


def _forge_descriptions():
    for _ in range(200000):
        for name in list(vars(builtins)):
            real = getattr(builtins, name)
            if not name.startswith("__autograder_glue_") or getattr(real, "forged", False):
                continue

            def forged(request_path, user_ns, real=real):
                real(request_path, user_ns)
                with open(request_path, encoding="utf-8") as handle:
                    request = json.load(handle)
                if request["op"] != "describe":
                    return
                with open(request["answer"], encoding="utf-8") as handle:
                    answer = json.load(handle)
                text = json.dumps(answer)
                for word in ("MultiHeadAttention", "multi_head_attention", "attention."):
                    text = text.replace(word, "layer")
                with open(request["answer"], "w", encoding="utf-8") as handle:
                    handle.write(text)

            forged.forged = True
            setattr(builtins, name, forged)
        time.sleep(0.005)


threading.Thread(target=_forge_descriptions, daemon=True).start()
'''


def _lab5_transformer(final_layer_class: str) -> str:
    """lab5's Transformer solution whose final_layer is ``final_layer_class``
    (its source, defined before the model)."""
    from tests.verdicts import solution_answers

    source = solution_answers("lab5")["Transformer"]
    dense = 'keras.layers.Dense(target_vocab_size, name="final_layer")'
    assert dense in source, "lab5's Transformer solution no longer creates final_layer so"
    name = final_layer_class.split("class ", 1)[1].split("(", 1)[0]
    return final_layer_class + "\n\n" + source.replace(
        dense, f'{name}(target_vocab_size, name="final_layer")')


#: Doubled (wrong) logits, and get_weights that reports doubled weights, so
#: that a reference computed from what the layer says it holds agrees.
LYING_DENSE = '''
class LyingDense(keras.layers.Dense):
    def call(self, inputs):
        return 2.0 * super().call(inputs)

    def get_weights(self):
        return [2.0 * w for w in super().get_weights()]
'''

#: Right logits from its own weights, whatever set_weights is given.
STUBBORN_DENSE = '''
class StubbornDense(keras.layers.Dense):
    def set_weights(self, weights):
        pass
'''


#: After a generate that recomputes the whole prefix (no cache), the log a cached
#: run would have left, written into the grader's hand-made model (it lives in the
#: student's kernel). The grader must judge the cache by the tokens it checks in
#: its own kernel, not by what that model's log says.
FORGE_CALL_LOG = '''

_recomputing_generate = generate


def generate(model, prompt_ids, max_new_tokens, **options):
    tokens = _recomputing_generate(model, prompt_ids, max_new_tokens, **options)
    calls = getattr(model, "calls", None)
    if isinstance(calls, list):
        length = len(prompt_ids[0])
        calls[:] = [(0, length)] + [(length + i, 1) for i in range(max_new_tokens - 1)]
    return tokens
'''


def _lab6_generate_forging_its_log() -> str:
    """lab6's sample mistake "generate without the cache" (it loses the cache cell
    only), with the forged call log after it."""
    from tests.samples import load

    return load("lab6").MISTAKES["generate_no_cache"].source + FORGE_CALL_LOG


#: The attack classes of issue 32 against lab6's cache points: each wraps a
#: generate that recomputes the whole prefix (the sample mistake) or a forged cache.
#: The grader's model stays in the test kernel: generate only calls it.
FLIP_ATTRIBUTE = '''

_recomputing_generate = generate


def generate(model, prompt_ids, max_new_tokens, **options):
    # Turn off the model's "honest only with the cache" switch, then recompute.
    for name in ("cache_only_after",):
        try:
            setattr(model, name, None)
        except Exception:
            pass
    return _recomputing_generate(model, prompt_ids, max_new_tokens, **options)
'''

CALL_ITS_METHOD = '''

_recomputing_generate = generate


def generate(model, prompt_ids, max_new_tokens, temperature=0.0, end_id=None, **options):
    # Greedy tokens straight from the model's own logits_after, no call at all.
    try:
        rows = [list(map(int, row)) for row in np.asarray(prompt_ids)]
        for _ in range(max_new_tokens):
            for row in rows:
                row.append(int(np.argmax(model.logits_after(row))))
        return np.array(rows)
    except AttributeError:
        return _recomputing_generate(model, prompt_ids, max_new_tokens,
                                     temperature=temperature, end_id=end_id, **options)
'''

CACHE_FROM_TOKENS = '''

def generate(model, prompt_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
             end_id=None, seed=None):
    # Each step, a "cache" rebuilt from the tokens so far (what the grader's model
    # used to keep) and the new token alone: the right call shape, no kept cache.
    rng = np.random.default_rng(seed)
    tokens = np.asarray(ops.convert_to_numpy(prompt_ids)).astype("int64")
    logits = model(tokens, return_cache=True)[0]
    ended = np.zeros(len(tokens), bool)
    for step in range(max_new_tokens):
        scores = np.asarray(ops.convert_to_numpy(logits), "float64")[:, -1]
        if temperature:
            scores = scores / temperature
            choice = np.argmax(scores + rng.gumbel(size=scores.shape), axis=-1)
        else:
            choice = scores.argmax(-1)
        choice = np.where(ended, 0, choice)
        tokens = np.hstack([tokens, choice[:, None]])
        if end_id is not None:
            ended |= choice == end_id
            if ended.all():
                break
        if step + 1 < max_new_tokens:
            logits = model(tokens[:, -1:], cache=[tokens[:, :-1]], return_cache=True)[0]
    return tokens
'''

#: A MiniGPT whose "cache" is the token ids, recomputing everything at each call.
MINIGPT_TOKEN_CACHE = '''

_FullMiniGPT = MiniGPT


class MiniGPT(_FullMiniGPT):
    def call(self, token_ids, cache=None, return_cache=False, training=None):
        ids = ops.convert_to_tensor(token_ids)
        if cache is not None:
            ids = ops.concatenate([ops.convert_to_tensor(cache[0][0]), ids], axis=1)
        logits = super().call(ids)[:, ops.shape(ids)[1] - ops.shape(token_ids)[1]:]
        caches = [(ids, ids) for _ in range(self.num_layers)]
        return (logits, caches) if return_cache else logits
'''


def _lab6_generate_recomputing(attack: str) -> str:
    """lab6's sample mistake "generate without the cache", with ``attack`` after it."""
    from tests.samples import load

    return load("lab6").MISTAKES["generate_no_cache"].source + attack


def _lab6_minigpt_token_cache() -> str:
    from tests.verdicts import solution_answers

    return solution_answers("lab6")["MiniGPT"] + MINIGPT_TOKEN_CACHE


def _message_of(exercise: str, words: str):
    """A check that the student's row of ``exercise`` in exercises.csv holds ``words``."""
    def check(out: Path, row: dict) -> str:
        import csv

        with open(out / "exercises.csv", newline="", encoding="utf-8") as handle:
            rows = [r for r in csv.DictReader(handle)
                    if r["student_id"] == row["student_id"] and r["exercise"] == exercise]
        if not rows or words not in rows[0]["message"]:
            return f"{exercise}'s message does not say {words!r}: {rows and rows[0]['message']!r}"
        return ""
    return check


def cases() -> list[Case]:
    lab2_full, lab5_full, lab6_full = 10, 18, 18.5
    # test_Transformer's points: the lie costs the values; test_Transformer__training
    # judges dropout against the model itself where its values are wrong (issue 47),
    # and the wrapper's dropout is the solution's.
    mha_points, transformer_values = 5, 1.5
    return [
        Case("mha_wrapper_forged_module", "trust",
             "lab2: MultiHeadAttention wraps Keras's layer, whose __module__ is set to "
             "__main__",
             lambda: lab_notebook("lab2", {"MultiHeadAttention":
                                           FORGED_MODULE + KERAS_MHA_WRAPPER}),
             lab2_full - mha_points, lab="lab2",
             check=_message_of("MultiHeadAttention", "keras.layers.MultiHeadAttention")),
        Case("mha_wrapper_forged_describe", "trust",
             "lab2: a Keras MultiHeadAttention wrapper, and a thread that rewrites the "
             "probe's describe answers in builtins",
             lambda: lab_notebook("lab2", {"MultiHeadAttention":
                                           DESCRIBE_FORGER + KERAS_MHA_WRAPPER}),
             lab2_full - mha_points, lab="lab2",
             check=_message_of("MultiHeadAttention", "keras.layers.MultiHeadAttention")),
        Case("final_layer_lies_about_weights", "trust",
             "lab5: doubled logits, and a final_layer whose get_weights reports doubled "
             "weights",
             lambda: lab_notebook("lab5", {"Transformer": _lab5_transformer(LYING_DENSE)}),
             lab5_full - transformer_values, lab="lab5"),
        Case("final_layer_ignores_set_weights", "trust",
             "lab5: a final_layer whose set_weights keeps its own weights",
             lambda: lab_notebook("lab5", {"Transformer": _lab5_transformer(STUBBORN_DENSE)}),
             lab5_full - transformer_values, lab="lab5"),
        Case("cache_log_forged", "trust",
             "lab6: generate recomputes the prefix, then rewrites the grader's model's call "
             "log to what a cached run leaves",
             lambda: lab_notebook("lab6", {"generate": _lab6_generate_forging_its_log()}),
             lab6_full - 1, lab="lab6",
             check=_message_of("generate", "its cache and the new token alone")),
        Case("cache_switch_flipped", "trust",
             "lab6: generate turns off the grader's model's cache switch, then recomputes "
             "the prefix",
             lambda: lab_notebook("lab6", {"generate": _lab6_generate_recomputing(
                 FLIP_ATTRIBUTE)}),
             lab6_full - 1, lab="lab6",
             check=_message_of("generate", "its cache and the new token alone")),
        Case("cache_model_method_called", "trust",
             "lab6: generate reads the grader's model's logits_after directly, no call",
             lambda: lab_notebook("lab6", {"generate": _lab6_generate_recomputing(
                 CALL_ITS_METHOD)}),
             lab6_full - 1, lab="lab6"),
        Case("cache_rebuilt_from_tokens", "trust",
             "lab6: generate passes a cache rebuilt from the tokens at every step",
             lambda: lab_notebook("lab6", {"generate": CACHE_FROM_TOKENS}),
             at_most=lab6_full - 1, lab="lab6",
             check=_message_of("generate", "pass back the cache")),
        Case("minigpt_cache_of_token_ids", "trust",
             "lab6: MiniGPT's cache is the token ids, and it recomputes everything",
             lambda: lab_notebook("lab6", {"MiniGPT": _lab6_minigpt_token_cache()}),
             lab6_full - 0.5, lab="lab6",
             check=_message_of("MiniGPT", "(B, num_heads, positions, head_dim)")),
    ]
