"""The proxies hidden tests use, against a real (unsandboxed) kernel."""

from __future__ import annotations

import json
import os
import re
import textwrap

import numpy as np
import pytest
from jupyter_client import BlockingKernelClient, KernelManager

from autograder.kernels.probe import (StudentCodeError, StudentKernel, Tensor, messages,
                                      read_arrays, redact, ship_code, wire)
from autograder.kernels.probe.transports import ExecuteTransport, PipeTransport

STUDENT_CODE = textwrap.dedent('''
    import time
    import numpy as np
    import keras

    def helper(x):
        return x + 100            # a wrong helper the stand-in must replace

    def uses_helper(x):
        return helper(x)

    def pair(x):
        return x * 2, {"sum": float(np.sum(x)), "name": "pair"}

    def broken(x):
        raise ValueError("shapes do not match")

    def loops():
        while True:
            time.sleep(0.01)

    class Wrapper(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.inner = keras.layers.Dense(3)
        def call(self, x):
            return self.inner(x)

    SEEN = []   # for each call of Stack.call: did its ops run on values (or were traced)?

    class Stack(keras.layers.Layer):
        """Nested layers with no build() of their own: Keras builds them by a first call."""
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.first = Wrapper()
            self.second = keras.layers.Dense(2)
        def call(self, x):
            try:   # an op's result: a value when run, a symbol when traced
                keras.ops.convert_to_numpy(keras.ops.add(x, 0.0))
                SEEN.append(True)
            except Exception:
                SEEN.append(False)
            return self.second(self.first(x))

    def built_stack(x):
        """A Stack and what its first call did, seen from the layer."""
        SEEN.clear()
        layer = Stack()
        out = keras.ops.convert_to_numpy(layer(x))
        locked = []
        for owner in (layer, layer.first):
            try:
                owner.extra = keras.layers.Dense(1)
                locked.append(False)
            except Exception:
                locked.append(True)
        return {"seen": list(SEEN), "built": [layer.built, layer.first.built, layer.second.built],
                "weights": [(w.path.split("/", 1)[1], tuple(w.shape)) for w in layer.weights],
                "handles": [str(getattr(w.value, "name", "")) for w in layer.weights],
                "locked": locked, "shape": list(out.shape), "backend": keras.backend.backend()}

    def backend_kind(x):
        return type(x).__module__.split(".")[0]

    def called_kind(model, x):
        return backend_kind(model(x))

    def as_text(x, kind):
        return np.full(np.shape(x), "nan" if kind == "str" else b"nan")

    def leaks(x):
        raise ValueError("inputs were " + repr(np.asarray(x)))

    def drive(model, steps):
        # What a student's generate does with the grader's model: call it, pass
        # back the cache it returned.
        out, cache = model(np.array([[1, 2]]), return_cache=True)
        seen = [np.asarray(out).tolist()]
        for step in range(steps):
            out, cache = model(np.array([[step]]), cache=cache, return_cache=True)
            seen.append(np.asarray(out).tolist())
        return seen

    def pry(model, how):
        # What a forger tries on it.
        if how == "attribute":
            return model.calls
        if how == "set":
            model.calls = []
        if how == "method":
            return model.logits_after([1, 2])
        if how == "forged cache":
            return model(np.array([[3]]), cache=[np.array([[1, 2]])])
        if how == "object":
            return model(object())
        return None

    def closes_the_pipes():
        # Closes the glue's ends of the grader's pipes.
        import glob, os
        pipes = set()
        for path in glob.glob(os.path.join(os.getcwd(), "exchange*", "*.*s")):
            found = os.stat(path)
            pipes.add((found.st_dev, found.st_ino))
        closed = 0
        for fd in range(3, 1024):
            try:
                found = os.fstat(fd)
            except OSError:
                continue
            if (found.st_dev, found.st_ino) in pipes:
                os.close(fd)
                closed += 1
        return closed

    def reads_requests(x):
        # What a student's code can read of the request: the exchange folder's
        # files and the stand-ins' objects.
        import glob, inspect, os
        found = [open(path, errors="replace").read() for path in
                 glob.glob(os.path.join(os.getcwd(), "exchange", "*.request.json"))]
        try:
            found.append(inspect.getsource(helper))
        except (OSError, TypeError):
            pass
        return " ".join(found)
''')

STAND_IN = 'def helper(x):\n    """Adds one (the reference\'s own words)."""\n    return x + 1\n'


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    work = tmp_path_factory.mktemp("probe")
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(work), env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    client.execute_interactive(STUDENT_CODE, timeout=120)
    student = StudentKernel(manager.connection_file, str(work / "exchange"),
                            pgid=os.getpgid(manager.provisioner.pid), timeout=5)
    yield student
    client.stop_channels()
    manager.shutdown_kernel(now=True)


def test_a_call_brings_back_arrays_and_plain_values(kernel):
    namespace: dict = {}
    kernel.bind(namespace, ["pair"])
    doubled, info = namespace["pair"](np.arange(3.0))
    np.testing.assert_array_equal(doubled, [0.0, 2.0, 4.0])
    assert info == {"sum": 3.0, "name": "pair"}


def test_the_students_exception_becomes_a_readable_failure(kernel):
    namespace: dict = {}
    kernel.bind(namespace, ["broken", "missing_name"])
    with pytest.raises(StudentCodeError, match="`broken` raised ValueError: shapes do not match"):
        namespace["broken"](np.zeros(2))
    with pytest.raises(StudentCodeError, match="`missing_name` is not defined"):
        namespace["missing_name"](1)


def test_stand_ins_replace_other_exercises_only_during_the_call(kernel):
    namespace: dict = {}
    kernel.stand_ins_for = lambda name: ({"helper": ship_code(STAND_IN, "<stand-in helper>")}
                                         if name == "uses_helper" else {})
    kernel.bind(namespace, ["uses_helper", "helper"])
    assert namespace["uses_helper"](np.ones(1))[0] == 2.0       # the stand-in
    assert namespace["helper"](np.ones(1))[0] == 101.0          # the student's, restored


def test_layers_stay_remote_and_can_be_described(kernel):
    namespace: dict = {}
    kernel.bind(namespace, ["Wrapper"])
    layer = namespace["Wrapper"]()
    output = layer(np.ones((2, 4), "float32"))
    assert output.shape == (2, 3)
    assert [w.shape for w in layer.get_weights()] == [(4, 3), (3,)]
    description = layer.describe()
    assert description["class"].endswith("Wrapper")
    assert [s["class"].rsplit(".", 1)[-1] for s in description["sublayers"]] == ["Dense"]


def test_a_grader_call_builds_a_layer_by_running_it_on_its_inputs(kernel):
    """Keras builds a layer that has no build() of its own by running its
    call() once first, on symbolic inputs (a trace: most of a hidden test's
    time), then again for the answer. During the grader's calls the call
    for the answer builds it, on the inputs given: the same weights, names
    and order, the same built and locked state, and call() runs once, on
    values."""
    x = np.ones((2, 4), "float32")
    graded = remote(kernel, "built_stack")(x)
    kernel.end_cell()   # the kernel stops serving: it runs a cell next
    # The same function run as the student's own cell: Keras's own way (on a
    # client of its own: the test kernel's reads no output).
    client = BlockingKernelClient(connection_file=kernel.connection_file)
    client.load_connection_file()
    client.start_channels()
    reply = client.execute_interactive(
        "import json; print(json.dumps(built_stack(np.ones((2, 4), 'float32'))))",
        timeout=60, output_hook=_keep_stdout)
    assert reply["content"]["status"] == "ok"
    own = json.loads(_STDOUT.pop())
    assert own["seen"] == [False, True]          # traced first, then called
    assert graded["seen"] == [True]              # called once, on the inputs
    for key in ("built", "locked", "shape"):
        assert graded[key] == own[key], key
    def unnumbered(weights):   # Keras numbers each new layer's name: wrapper_3/dense_5
        return [[re.sub(r"_\d+(?=/|$)", "", name), list(shape)] for name, shape in weights]

    assert unnumbered(graded["weights"]) == unnumbered(own["weights"])
    assert [name for name, _ in unnumbered(own["weights"])] == [
        "wrapper/dense/kernel", "wrapper/dense/bias", "dense/kernel", "dense/bias"]
    assert graded["built"] == [True, True, True] and graded["locked"] == [True, True]
    if own["backend"] == "tensorflow":
        # TensorFlow's own handle names: scoped as Keras makes them, and during
        # the grader's calls made outside the scope (TensorFlow's kernel cache
        # then answers); Keras's paths above are the same both ways.
        assert all(re.fullmatch(r"stack(_\d+)?/.*(kernel|bias):0", name)
                   for name in own["handles"]), own["handles"]
        assert graded["handles"] == ["kernel:0", "bias:0", "kernel:0", "bias:0"]
    # Outside the grader's calls, Keras is as it was.
    client.execute_interactive(
        "print(json.dumps(built_stack(np.ones((2, 4), 'float32'))['seen']))",
        timeout=60, output_hook=_keep_stdout)
    client.stop_channels()
    assert json.loads(_STDOUT.pop()) == [False, True]


_STDOUT: list[str] = []


def _keep_stdout(message) -> None:
    if message["msg_type"] == "stream" and message["content"]["name"] == "stdout":
        _STDOUT.append(message["content"]["text"])


def test_tensors_are_sent_as_backend_tensors_when_asked(kernel):
    namespace: dict = {}
    kernel.bind(namespace, ["backend_kind"])
    assert namespace["backend_kind"](np.ones(2)) == "numpy"
    assert namespace["backend_kind"](Tensor(np.ones(2))) != "numpy"


def test_a_runaway_call_is_interrupted_and_the_kernel_answers_again(kernel):
    namespace: dict = {}
    kernel.bind(namespace, ["loops", "pair"])
    with pytest.raises(StudentCodeError, match="did not return within 5 s"):
        namespace["loops"]()
    doubled, _ = namespace["pair"](np.ones(1))
    assert doubled[0] == 2.0


def test_grader_fixtures_are_built_inside_the_student_kernel(kernel):
    source = textwrap.dedent('''
        import numpy as np
        class Fixed:
            def __init__(self, value):
                self.value = value
            def __call__(self, x):
                return np.asarray(x) * 0 + self.value
    ''')
    fixture = kernel.construct(source, "Fixed", 7.0)
    assert fixture.remote_type == "Fixed"
    namespace: dict = {}
    kernel.bind(namespace, ["pair"])
    np.testing.assert_array_equal(fixture(np.ones(2)), [7.0, 7.0])


def test_calls_pass_by_input_transformers_and_exception_handlers(kernel):
    client = kernel.client
    client.execute(
        "def _strip(lines):\n    return [l for l in lines if 'raise' not in l]\n"
        "get_ipython().input_transformers_post.append(_strip)\n"
        "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)",
        store_history=False)
    import time
    time.sleep(1)
    namespace: dict = {}
    kernel.bind(namespace, ["pair", "broken"])
    doubled, _ = namespace["pair"](np.ones(2))
    assert doubled.tolist() == [2.0, 2.0]
    with pytest.raises(StudentCodeError, match="ValueError"):
        namespace["broken"](np.zeros(1))


def test_many_calls_and_attributes_in_one_request_and_a_failure_names_its_path(kernel):
    namespace: dict = {}
    kernel.bind(namespace, ["Wrapper"])
    layer = namespace["Wrapper"]()
    layer(np.ones((2, 4), dtype="float32"))
    before = next(kernel._counter)
    units, weights, name = layer.many([("inner.units", None), ("inner.get_weights", ()),
                                       ("inner.name", None)])
    assert next(kernel._counter) == before + 2          # one request for the three
    assert units == 3 and [w.shape for w in weights] == [(4, 3), (3,)] and isinstance(name, str)
    new = [np.full((4, 3), 0.5, "float32"), np.zeros(3, "float32")]
    assert layer.many([("inner.set_weights", (new,))]) == [None]
    np.testing.assert_array_equal(layer(np.ones((1, 4), dtype="float32")), [[2.0, 2.0, 2.0]])
    with pytest.raises(StudentCodeError, match=r"`Wrapper\.inner\.nowhere` raised "
                                               "AttributeError"):
        layer.many([("inner.units", None), ("inner.nowhere", None)])


@pytest.mark.parametrize("kind", ["str", "bytes"])
def test_text_arrays_are_refused_as_answers(kernel, kind):
    # Converted to float64, "nan" is NaN, and NaN passes every tolerance test.
    namespace: dict = {}
    kernel.bind(namespace, ["as_text"])
    with pytest.raises(StudentCodeError, match="array of (text|bytes).*expected numbers"):
        namespace["as_text"](np.ones((2, 3)), kind)


def test_a_students_message_keeps_its_words_but_not_the_inputs(kernel):
    namespace: dict = {}
    kernel.bind(namespace, ["leaks"])
    inputs = np.random.default_rng(0).normal(size=(4, 5))
    with pytest.raises(StudentCodeError) as failure:
        namespace["leaks"](inputs)
    message = str(failure.value)
    assert "`leaks` raised ValueError: inputs were array(" in message
    quoted = message.split("array(")[1].split(" (your code")[0]
    assert "." not in quoted                              # not one decimal of the inputs
    assert len(message) < 4 * messages.MAX_MESSAGE_CHARS


def test_redact_hides_data_keeps_shapes_and_cuts():
    assert redact("shapes (2, 3, 4) and (2, 4) do not match") == \
        "shapes (2, 3, 4) and (2, 4) do not match"
    assert redact("got 0.125 and 3e-05") == "got … and …"
    assert redact("ids 5 8 13 21 34 55 89") == "ids …"
    assert redact("bytes " + "ab12" * 20) == "bytes …"
    # escape sequences go whole (never "?[1m"), other control bytes become "?"
    assert redact("a\x1b]0;title\x07b") == "ab"
    assert redact("\x1b[1mbold\x1b[0m a\x00b") == "bold a?b"
    # cut after a whole word, never inside one
    cut = redact("word " * 100 + "x_padding_mask=None", limit=497)
    assert cut.endswith("word… (cut)") and "x_paddin" not in cut
    assert len(redact("word " * 200)) < messages.MAX_MESSAGE_CHARS + 10


def test_stand_ins_travel_compiled_without_source_or_docstrings(kernel):
    shipped = ship_code(STAND_IN, "<stand-in helper>")
    namespace: dict = {}
    kernel.stand_ins_for = lambda name: {"helper": shipped} if name == "reads_requests" else {}
    kernel.bind(namespace, ["reads_requests"])
    seen = namespace["reads_requests"](np.ones(1))
    assert shipped in seen                          # the request was read, but holds
    assert "return x + 1" not in seen and "reference's own words" not in seen  # no source
    import base64
    import marshal

    code = marshal.loads(base64.b64decode(shipped))
    helper = next(const for const in code.co_consts if hasattr(const, "co_consts"))
    assert not any(isinstance(c, str) and "reference" in c for c in helper.co_consts)


def test_a_message_holding_the_shipped_code_is_redacted():
    shipped = ship_code('def f():\n    raise ValueError("the reference\'s secret wording")\n',
                        "<stand-in f>")
    text = redact(f"found {shipped[10:40]} and the reference's secret wording", [shipped])
    assert shipped[10:40] not in text and "secret wording" not in text


def test_compressed_answers_are_refused_by_their_headers(tmp_path, monkeypatch):
    # Read in wire at each use, where it is defined (not on the package).
    monkeypatch.setattr(wire, "MAX_ANSWER_BYTES", 2**20)
    path = tmp_path / "answer.npz"
    np.savez_compressed(path, a0=np.broadcast_to(np.float64(0.0), (1024, 256)))  # 2 MiB
    assert path.stat().st_size < 2**16
    with pytest.raises(StudentCodeError, match="at least 2 MiB once unpacked"):
        read_arrays(path, "dot_scores")
    np.savez_compressed(path, a0=np.zeros(4), a1=np.full(3, "nan"))
    with pytest.raises(StudentCodeError, match="array of text"):
        read_arrays(path, "dot_scores")
    np.savez_compressed(path, a0=np.arange(4.0))
    np.testing.assert_array_equal(read_arrays(path, "x")["a0"], np.arange(4.0))


def test_the_test_kernels_client_does_not_subscribe_to_output(kernel):
    # Nothing reads the student's output there; a subscription would queue it.
    assert kernel.client._iopub_channel is None


def test_code_compiled_by_another_python_is_refused_clearly(kernel, monkeypatch):
    monkeypatch.setattr(wire, "MAGIC", "00000000")   # read by the client at each request
    namespace: dict = {}
    kernel.bind(namespace, ["pair"])
    with pytest.raises(StudentCodeError, match="GraderError: .*different Python versions"):
        namespace["pair"](np.ones(1))


def remote(kernel, name):
    namespace: dict = {}
    kernel.bind(namespace, [name])
    return namespace[name]


class CountingLM:
    """A grader's model kept in the test kernel: the sum of the tokens so far,
    with a cache the student's code cannot open."""

    class Cache:
        def __init__(self, total):
            self.total = total

    def __init__(self):
        self.calls = []

    def logits_after(self, prefix):
        return sum(prefix)

    def __call__(self, token_ids, cache=None, return_cache=False, training=False):
        ids = np.asarray(token_ids)
        if cache is not None and not isinstance(cache, CountingLM.Cache):
            raise ValueError("cache: pass back the cache this model returned")
        total = (0 if cache is None else cache.total) + int(ids.sum())
        self.calls.append((None if cache is None else cache.total, ids.shape[1]))
        out = np.full((1, ids.shape[1]), total, dtype=np.float32)
        return (out, CountingLM.Cache(total)) if return_cache else out


def test_a_hosted_model_is_called_back_and_its_cache_stays_opaque(kernel):
    model = CountingLM()
    seen = remote(kernel, "drive")(kernel.host(model), 3)
    assert seen == [[[3.0, 3.0]], [[3.0]], [[4.0]], [[6.0]]]
    assert model.calls == [(None, 2), (3, 1), (3, 1), (4, 1)]   # the grader's own log


class TensorLM:
    """A grader's model that answers with tensors (as lab 6's language models)."""

    as_tensor = None

    def __call__(self, token_ids):
        out = np.asarray(token_ids, dtype=np.float32) * 2
        return out if self.as_tensor is None else self.as_tensor(out)


def test_a_hosted_model_s_tensors_are_backend_tensors_in_the_student_s_kernel(kernel):
    # Made there from the data: the test kernel that hosts the model need not
    # import Keras (testing.hoster sets the model's as_tensor to probe.Tensor).
    from autograder.testkernel.testing import hoster

    model = TensorLM()
    host = hoster({"__autograder_kernel__": kernel})
    assert remote(kernel, "called_kind")(host(model), np.ones((1, 2))) not in ("numpy", "builtins")
    assert model.as_tensor is not None
    plain = TensorLM()   # without the marker: a NumPy array stays one
    assert remote(kernel, "called_kind")(kernel.host(plain), np.ones((1, 2))) == "numpy"


@pytest.mark.parametrize("how, words", [
    ("attribute", "no attribute 'calls'"), ("set", "cannot be changed"),
    ("method", "no attribute 'logits_after'"), ("forged cache", "pass back the cache"),
    ("object", "takes token ids"),
])
def test_a_hosted_model_can_only_be_called_with_data(kernel, how, words):
    model = CountingLM()
    with pytest.raises(StudentCodeError, match=words):
        remote(kernel, "pry")(kernel.host(model), how)
    assert model.calls == []


def test_a_forged_callback_file_gets_an_error_reply_and_nothing_runs(kernel, tmp_path):
    model = CountingLM()
    hosted = kernel.host(model)
    # A callback naming no hosted object, and one with an argument of an unknown kind.
    exchange = kernel.exchange
    (exchange / "cb-900001.call.json").write_text('{"id": 999, "args": {"t": "list", "v": []}, '
                                                  '"kwargs": {"t": "dict", "v": {}}}')
    (exchange / "cb-900002.call.json").write_text(
        '{"id": %d, "args": {"t": "list", "v": [{"t": "ref", "id": 1}]}, '
        '"kwargs": {"t": "dict", "v": {}}}' % hosted.handle)
    assert kernel._serve_callbacks("forged")
    replies = [json.loads((exchange / f"cb-{n}.reply.json").read_text())
               for n in (900001, 900002)]
    assert [reply["ok"] for reply in replies] == [False, False]
    assert "names no object" in replies[0]["message"]
    assert "does not take" in replies[1]["message"]
    assert model.calls == []


def _fresh(kernel, tmp_path, name: str, plain: bool = False) -> StudentKernel:
    """Another test kernel's client of the same student kernel (a submission's
    tests start with one: serving not yet tried). The module's own client
    ends its serving first, as a tests cell's end does: the student's kernel
    serves one client at a time, and would not run the new one's requests
    while it serves the old one's pipe."""
    kernel.end_cell()
    folder = kernel.exchange.parent / f"exchange-{name}"
    return StudentKernel(kernel.connection_file, str(folder), timeout=5, plain=plain)


def _runs_a_cell(client) -> bool:
    """Whether the student's kernel runs a cell again (serving has ended)."""
    message = client.execute("_ran = 1", silent=True)
    while True:
        try:
            reply = client.get_shell_msg(timeout=5)
        except Exception:  # noqa: BLE001 - queue.Empty
            return False
        if reply["parent_header"].get("msg_id") == message:
            return reply["content"]["status"] == "ok"


def test_a_tests_cells_calls_go_on_a_pipe_and_end_with_the_cell(kernel, tmp_path):
    student = _fresh(kernel, tmp_path, "served")
    namespace: dict = {}
    student.bind(namespace, ["pair", "Wrapper"])
    for step in range(20):
        doubled, _ = namespace["pair"](np.full(2, float(step)))
        assert doubled.tolist() == [2.0 * step] * 2
    layer = namespace["Wrapper"]()
    assert layer(np.ones((2, 4), "float32")).shape == (2, 3)
    pipes = sorted(path.suffix for path in student.exchange.iterdir() if path.is_fifo())
    assert pipes == [".answers", ".requests"]
    profile = json.loads(student.end_cell())
    assert profile["requests"] == 22 and profile["ops"] == {"call": 22}, profile
    assert not [path for path in student.exchange.iterdir() if path.is_fifo()]
    assert _runs_a_cell(student.client)
    # The next tests cell serves again, on new pipes.
    student.bind(namespace, ["pair"])
    assert namespace["pair"](np.ones(1))[0][0] == 2.0
    assert json.loads(student.end_cell())["requests"] == 1
    student.close()


def test_a_notebook_that_closes_the_pipes_is_still_tested(kernel, tmp_path):
    """Serving ends with the pipes; the tests go on one execute request a
    call, and the kernel runs cells after."""
    student = _fresh(kernel, tmp_path, "closed")
    namespace: dict = {}
    student.bind(namespace, ["closes_the_pipes", "pair"])
    assert namespace["closes_the_pipes"]() == 2
    for _ in range(3):
        assert namespace["pair"](np.ones(1))[0][0] == 2.0
    student.end_cell()
    assert _runs_a_cell(student.client)
    student.close()


def test_plain_calls_are_execute_requests_chosen_once(kernel, tmp_path):
    """`grade --plain`: the transport is chosen when the client starts, an
    execute request a call, and no pipe is ever made."""
    assert isinstance(kernel.transport, PipeTransport)
    student = _fresh(kernel, tmp_path, "plain", plain=True)
    assert type(student.transport) is ExecuteTransport
    namespace: dict = {}
    student.bind(namespace, ["pair", "broken"])
    for _ in range(3):
        assert namespace["pair"](np.ones(1))[0][0] == 2.0
    with pytest.raises(StudentCodeError, match="`broken` raised ValueError"):
        namespace["broken"](np.zeros(1))
    assert not [path for path in student.exchange.iterdir() if path.is_fifo()]
    profile = json.loads(student.end_cell())
    assert profile["requests"] == 4 and profile["piped"] == 0, profile
    assert _runs_a_cell(student.client)
    student.close()
