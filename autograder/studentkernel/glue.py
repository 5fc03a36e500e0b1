"""Code the test kernel sends into the student's kernel for each call.

This file is read as text and executed inside the student's kernel, in a
namespace of its own, the first time the test kernel sends a request; its
`handle` is then kept in the kernel's builtins for the requests that follow
(autograder.kernels.probe.GLUE_CALL). It imports nothing from the kit. It reads a request (JSON and
an .npz of arrays, allow_pickle=False) from the exchange folder, runs the
call on the student's object, and writes the answer the same way. The
grader's stand-ins and fixtures arrive as compiled code objects (marshal,
base64), which run only under the same Python as the test kernel's.

Whatever it returns is only data (numbers, strings, arrays, references to
objects that stay in the student's kernel): the comparison with references
happens in the test kernel, which the student's code never touches. The
protocol is specified in this package's __init__.py.
"""

import base64
import builtins
import importlib.util
import json
import marshal
import traceback

import numpy

_REGISTRY_NAME = "__autograder_objects__"


def _registry():
    registry = getattr(builtins, _REGISTRY_NAME, None)
    if not isinstance(registry, dict):
        registry = {}
        setattr(builtins, _REGISTRY_NAME, registry)
    return registry


def _to_array(value):
    if isinstance(value, numpy.ndarray):
        return value
    if isinstance(value, (numpy.generic,)):
        return numpy.asarray(value)
    try:
        from keras import ops

        return numpy.asarray(ops.convert_to_numpy(value))
    except Exception:  # noqa: BLE001
        return numpy.asarray(value)


def _is_tensor_like(value):
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        return True
    if module.startswith(("tensorflow", "torch", "jax", "jaxlib", "keras")):
        return hasattr(value, "shape") and hasattr(value, "dtype")
    return False


class _Hosted:
    """A grader's object that stays in the test kernel (a model handed to your
    function): calling it asks the test kernel, which answers (the protocol's
    callbacks, this package's __init__.py). Nothing else of it is here."""

    __slots__ = ("_handle",)

    def __init__(self, handle):
        object.__setattr__(self, "_handle", handle)

    def __setattr__(self, name, value):
        raise AttributeError("the grader's objects (its model, the caches the model "
                             "returns) cannot be changed: call the model, pass the caches "
                             "back as they are")

    def __getattr__(self, name):
        raise AttributeError(
            f"the grader's object has no attribute {name!r} here: call the model as "
            f"model(token_ids, cache=None, return_cache=False, training=False), and pass "
            f"the caches it returns back as they are")

    def __repr__(self):
        return "<kept by the grader>"

    def __call__(self, *args, **kwargs):
        return _callback(self._handle, args, kwargs)


_CALLBACKS = {"folder": None, "count": 0}


def _callback(handle, args, kwargs):
    """One call of a hosted object: written to the exchange folder, answered
    by the test kernel while the current request runs."""
    import os
    import time

    folder = _CALLBACKS["folder"]
    if folder is None:
        raise RuntimeError("the grader's model can only be called while the grader "
                           "tests your code")
    _CALLBACKS["count"] += 1
    stem = os.path.join(folder, f"cb-{_CALLBACKS['count']}")
    arrays = {}
    call = {"id": handle, "args": _encode_call(list(args), arrays),
            "kwargs": _encode_call(dict(kwargs), arrays), "arrays": bool(arrays)}
    if arrays:
        with open(stem + ".call.npz", "wb") as handle_:
            numpy.savez(handle_, **arrays)
    with open(stem + ".call.tmp", "w", encoding="utf-8") as handle_:
        json.dump(call, handle_)
    os.replace(stem + ".call.tmp", stem + ".call.json")
    pause = 0.0001
    while not os.path.exists(stem + ".reply.json"):
        time.sleep(pause)
        pause = min(pause * 2, 0.001)
    with open(stem + ".reply.json", encoding="utf-8") as handle_:
        reply = json.load(handle_)
    arrays_in = {}
    if reply.get("arrays"):
        with numpy.load(stem + ".reply.npz", allow_pickle=False) as loaded:
            arrays_in = {key: loaded[key] for key in loaded.files}
    for suffix in (".reply.json", ".reply.npz"):
        try:
            os.remove(stem + suffix)
        except OSError:
            pass
    if not reply.get("ok"):
        kind = {"ValueError": ValueError, "TypeError": TypeError}.get(reply.get("type"),
                                                                      RuntimeError)
        raise kind(reply.get("message", "the grader's model refused the call"))
    return _decode(reply["value"], arrays_in)


def _encode_call(value, arrays):
    """An argument of a hosted object's call: data, or a handle it returned."""
    if isinstance(value, _Hosted):
        return {"t": "hosted", "id": value._handle}
    if value is None or isinstance(value, (bool, str, int, float)):
        return {"t": "plain", "v": value}
    if isinstance(value, (tuple, list)):
        return {"t": type(value).__name__, "v": [_encode_call(item, arrays) for item in value]}
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {"t": "dict", "v": {key: _encode_call(item, arrays) for key, item in value.items()}}
    if _is_tensor_like(value):
        array = _to_array(value)
        if array.dtype == object:
            raise TypeError("the grader's model takes arrays of numbers")
        key = f"a{len(arrays)}"
        arrays[key] = array
        return {"t": "array", "key": key}
    raise TypeError(f"the grader's model takes token ids (arrays or tensors), numbers and the "
                    f"caches it returned, not {type(value).__name__}")


def _encode(value, arrays):
    if isinstance(value, _Hosted):
        return {"t": "hosted", "id": value._handle}
    if value is None or isinstance(value, (bool, str)):
        return {"t": "plain", "v": value}
    if isinstance(value, int):
        return {"t": "plain", "v": int(value)}
    if isinstance(value, float):
        return {"t": "plain", "v": float(value)}
    if isinstance(value, (tuple, list)):
        return {"t": type(value).__name__, "v": [_encode(item, arrays) for item in value]}
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {"t": "dict", "v": {key: _encode(item, arrays) for key, item in value.items()}}
    if _is_tensor_like(value):
        array = _to_array(value)
        if array.dtype == object:
            raise TypeError(f"returned an array of Python objects ({type(value).__name__})")
        key = f"a{len(arrays)}"
        arrays[key] = array
        return {"t": "array", "key": key}
    registry = _registry()
    handle = len(registry) + 1
    registry[handle] = value
    return {"t": "ref", "id": handle, "type": type(value).__name__}


def _decode(encoded, arrays):
    kind = encoded["t"]
    if kind == "plain":
        return encoded["v"]
    if kind in ("list", "tuple"):
        items = [_decode(item, arrays) for item in encoded["v"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {key: _decode(item, arrays) for key, item in encoded["v"].items()}
    if kind == "array":
        return arrays[encoded["key"]]
    if kind == "tensor":
        from keras import ops

        return ops.convert_to_tensor(arrays[encoded["key"]])
    if kind == "ref":
        return _registry()[encoded["id"]]
    if kind == "hosted":
        return _Hosted(int(encoded["id"]))
    raise ValueError(f"unknown value kind {kind!r}")


def _resolve(target, user_ns):
    if "name" in target:
        name = target["name"]
        if name not in user_ns:
            raise NameError(
                f"`{name}` is not defined in the notebook. Run its cell, and keep "
                f"the name exactly `{name}`."
            )
        return user_ns[name]
    return _registry()[target["id"]]


def _walk(target, path):
    """``target.a.b`` for the path "a.b" (one request instead of one per name)."""
    for name in path.split("."):
        target = getattr(target, name)
    return target


def _class_path(kind):
    return f"{kind.__module__}.{kind.__qualname__}"


def _describe(target):
    """What an object is: its class, base classes and (for layers) sublayers."""
    kind = target if isinstance(target, type) else type(target)
    description = {
        "class": _class_path(kind),
        "bases": [_class_path(base) for base in kind.__mro__[1:]],
        "sublayers": [],
    }
    flatten = getattr(target, "_flatten_layers", None)
    if callable(flatten) and not isinstance(target, type):
        for layer in flatten(include_self=False, recursive=True):
            description["sublayers"].append({
                "name": getattr(layer, "name", ""),
                "class": _class_path(type(layer)),
                "bases": [_class_path(base) for base in type(layer).__mro__[1:]],
            })
    return description


_STAND_INS: dict = {}   # {(name, blob): the stand-in}


def _code(blob):
    """A code object compiled by the test kernel (autograder.kernels.probe.ship_code):
    the grader's stand-ins and fixtures never come here as source."""
    return marshal.loads(base64.b64decode(blob))


def _stand_in(name, blob):
    """The grader's correct version of ``name``, loaded once per kernel."""
    key = (name, blob)
    if key not in _STAND_INS:
        namespace = {}
        exec(_code(blob), namespace)
        _STAND_INS[key] = namespace[name]
    return _STAND_INS[key]


class GraderError(Exception):
    """The grader itself is misconfigured (not the student's code)."""


def _eager_builds():
    """Have Keras build layers by their first call on the concrete inputs
    they are given, while one grader's request runs; returns what undoes it
    (None where this Keras has nothing to change).

    A Keras layer with no build() of its own, whose sublayers are not built
    yet, is built by its first call: Keras runs call() once to create the
    sublayers' weights, then calls the default build(), which marks it built
    and locks its state, then runs call() for the answer. Keras runs that
    first call() on symbolic inputs (a trace, a TensorFlow graph); here the
    call for the answer is the one that builds, on the very inputs of the
    call, eagerly, and the default build() follows it. The weights made,
    their order and names, the locked state and what the call returns are
    the same; a small Transformer's first call is many times faster than
    the trace of every nested layer, which was most of a hidden test's
    time (docs/performance.md, "Why the code is shaped this way"), and call() runs once instead of twice. A call()
    that raises on the concrete inputs gets Keras's own trace next, so a
    student sees Keras's own error where it has one.

    Layers inside that first call() are built by their own call, as Keras
    does when it cannot trace; each is then given its build() (marked built,
    state locked) before the outer layer's, as the trace would.
    """
    try:
        import keras
        from keras.src.layers import layer as layer_module
    except Exception:  # noqa: BLE001 - no Keras 3 here: nothing to change
        return None
    layer_class = getattr(layer_module, "Layer", None)
    original = getattr(layer_class, "_maybe_build", None)
    if original is None or keras.backend.backend() not in ("tensorflow", "torch"):
        return None
    symbolic = getattr(keras, "KerasTensor", ())
    inner = []   # (layer, its first input's shape) built inside a first call, or None

    def concrete(call_spec):
        if keras.backend.backend() == "tensorflow":
            import tensorflow

            if not tensorflow.executing_eagerly():
                return False
        return not any(isinstance(value, symbolic)
                       for value in keras.tree.flatten(call_spec.arguments_dict))

    shapes_of = getattr(layer_module, "get_shapes_dict", None)

    def first_shape(call_spec):
        """What Keras's _maybe_build gives the default build()."""
        if shapes_of is not None:
            return next(iter(shapes_of(call_spec).values()), None)
        for value in call_spec.arguments_dict.values():
            shape = getattr(value, "shape", None)
            if shape is not None:
                return tuple(shape)
        return None

    def maybe_build(self, call_spec):
        if (self.built or not getattr(self.build, "_is_default", False)
                or all(sub.built for sub in getattr(self, "_layers", ()))
                or "call" in vars(self)      # (a call of the instance's own: left alone)
                or not concrete(call_spec)):
            return original(self, call_spec)
        if inner:   # inside an outer layer's first call: this call builds it
            inner.append((self, first_shape(call_spec)))
            return None
        # The call Keras makes next (the answer's) builds the layer: call()
        # is this instance's own until that call, which puts the method back.
        shape = first_shape(call_spec)
        method = self.call

        def first_call(*args, **kwargs):
            object.__delattr__(self, "call")
            inner.append(None)
            try:
                outputs = method(*args, **kwargs)
            except Exception:
                inner.clear()
                original(self, call_spec)   # Keras's own trace: its error, if it has one
                raise
            built = inner[1:]
            inner.clear()
            for sub, sub_shape in built:
                sub.build(sub_shape)
            self.build(shape)
            return outputs

        object.__setattr__(self, "call", first_call)
        return None

    layer_class._maybe_build = maybe_build
    undo_names = _unscoped_variables() if keras.backend.backend() == "tensorflow" else None

    def undo():
        layer_class._maybe_build = original
        if undo_names is not None:
            undo_names()

    return undo


def _unscoped_variables():
    """Have Keras's TensorFlow variables made during one grader's request
    created outside the layer's name scope; returns what undoes it (None
    where this Keras has nothing to change).

    TensorFlow names a variable's handle after the scope it is made in
    (``multi_head_attention_7/query/kernel``), a name no other variable has,
    and an eager operation with a new name misses TensorFlow's cache of
    kernels, for each of the few hundred variables a hidden test makes
    (the cost: docs/performance.md, "Why the code is shaped this way"). Outside the scope the handle is ``kernel``, and the cache
    answers. Only the TensorFlow variable's own name changes; Keras's name
    and path (``multi_head_attention_7/query/kernel``, what Keras saves and
    loads weights by), the values and the order are the same.
    """
    try:
        from keras.src.backend.tensorflow import core
        from tensorflow.python.eager import context
    except Exception:  # noqa: BLE001 - another Keras: nothing to change
        return None
    variable_class = getattr(core, "Variable", None)
    original = getattr(variable_class, "_initialize", None)
    if original is None:
        return None

    def initialize(self, value):
        eager = context.context()
        if not eager.executing_eagerly():
            return original(self, value)
        scope, eager.scope_name = eager.scope_name, ""
        try:
            return original(self, value)
        finally:
            eager.scope_name = scope

    variable_class._initialize = initialize

    def undo():
        variable_class._initialize = original

    return undo


def handle(request_path, user_ns):
    """Serve one request; the answer goes next to the request file.

    ``user_ns`` is the notebook's namespace (the caller passes its
    ``globals()``: the request is evaluated as a user expression there).
    """
    import os
    import time

    with open(request_path, encoding="utf-8") as handle_:
        request = json.load(handle_)
    _CALLBACKS["folder"] = os.path.dirname(request_path)
    answer_path = request["answer"]
    arrays_in = {}
    if request.get("arrays"):
        with numpy.load(request["arrays"], allow_pickle=False) as loaded:
            arrays_in = {key: loaded[key] for key in loaded.files}
    arrays_out = {}
    patched = {}
    progress = []
    try:
        if request.get("magic") != importlib.util.MAGIC_NUMBER.hex():
            raise GraderError(
                "the grader's test kernel and this notebook's kernel run different "
                "Python versions, so the grader's compiled code cannot run here; the "
                "instructor must start both with the same Python.")
        for name, blob in request.get("stand_ins", {}).items():
            patched[name] = user_ns.get(name, _MISSING)
            user_ns[name] = _stand_in(name, blob)
        started = time.perf_counter()
        # `grade --plain` asks for Keras's own first build (request "eager" false).
        undo = _eager_builds() if request.get("eager", True) else None
        try:
            result = _perform(request, arrays_in, user_ns, progress)
        finally:
            if undo is not None:
                undo()
        seconds = time.perf_counter() - started
        answer = {"ok": True, "value": _encode(result, arrays_out), "seconds": seconds}
    except BaseException as error:  # noqa: BLE001 - reported to the test kernel
        lines = traceback.format_exception(type(error), error, error.__traceback__)
        answer = {
            "ok": False,
            "type": type(error).__name__,
            "message": str(error)[:2000],
            "traceback": "".join(lines)[-4000:],
        }
        if progress:
            answer["index"] = progress[-1]
    finally:
        for name, previous in patched.items():
            if previous is _MISSING:
                user_ns.pop(name, None)
            else:
                user_ns[name] = previous
    if arrays_out:
        numpy.savez(answer_path + ".npz", **arrays_out)
        answer["arrays"] = answer_path + ".npz"
    with open(answer_path + ".tmp", "w", encoding="utf-8") as handle_:
        json.dump(answer, handle_)
    os.replace(answer_path + ".tmp", answer_path)


def serve(requests_path, answers_path, user_ns):
    """Serve the requests a tests cell names on the pipe ``requests_path``
    (one request file's path a line) until an empty line or the pipe's end;
    after each answer is written, its request's name (the file's name less
    ``.request.json``) goes on the pipe ``answers_path``.

    One execute request of the test kernel starts it (probe.GLUE_SERVE), so
    a call costs no round trip of the kernel's messages; what it runs for
    each request is handle(), as for a request sent alone.
    """
    import os

    with open(requests_path, "rb", buffering=0) as requests_, \
            open(answers_path, "wb", buffering=0) as answers:
        pending = b""
        while True:
            while b"\n" not in pending:
                chunk = requests_.read(65536)
                if not chunk:
                    return None
                pending += chunk
            line, _, pending = pending.partition(b"\n")
            if not line:
                return None
            request_path = line.decode("utf-8")
            handle(request_path, user_ns)
            name = os.path.basename(request_path)
            answers.write(name.removesuffix(".request.json").encode("utf-8") + b"\n")


handle.serve = serve  # type: ignore[attr-defined]  # reached from the kept handle (probe.GLUE_SERVE)


def _perform(request, arrays_in, user_ns, progress):
    """Run one request's operation and return its result. An exception
    propagates to handle(); ``progress`` then ends at the entry of a ``many``
    request that raised."""
    operation = request["op"]
    if operation not in _OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}")
    target = None if operation == "construct" else _resolve(request["target"], user_ns)
    return _OPERATIONS[operation](request, target, arrays_in, progress)


def _arguments(request, arrays_in):
    return _decode(request["args"], arrays_in), _decode(request["kwargs"], arrays_in)


def _construct(request, target, arrays_in, progress):
    namespace = {}
    exec(_code(request["code"]), namespace)
    args, kwargs = _arguments(request, arrays_in)
    return namespace[request["attr"]](*args, **kwargs)


def _call(request, target, arrays_in, progress):
    args, kwargs = _arguments(request, arrays_in)
    return target(*args, **kwargs)


def _getattr(request, target, arrays_in, progress):
    return _walk(target, request["attr"])


def _callmethod(request, target, arrays_in, progress):
    args, kwargs = _arguments(request, arrays_in)
    return _walk(target, request["attr"])(*args, **kwargs)


def _many(request, target, arrays_in, progress):
    """[[path, args or None], ...]: target.path, or target.path(*args), for
    each, in order, in one request (``progress`` ends at the one that raised)."""
    result = []
    for index, (path, args) in enumerate(_decode(request["args"], arrays_in)):
        progress.append(index)
        value = _walk(target, path)
        result.append(value if args is None else value(*args))
    progress.clear()
    return result


def _describe_operation(request, target, arrays_in, progress):
    return _describe(target)


#: The operations of the protocol (this package's __init__.py), by name.
_OPERATIONS = {"construct": _construct, "call": _call, "getattr": _getattr,
               "callmethod": _callmethod, "many": _many, "describe": _describe_operation}


_MISSING = object()
