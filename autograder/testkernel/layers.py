"""Helpers for hidden tests of Keras layers, under the grader and in place.

Under the grader, a student's layer is a proxy (autograder.kernels.probe.
RemoteObject) that walks attribute paths and calls methods in the student's
kernel, several in one round trip, and brings back NumPy. When the source
notebook runs top to bottom, the same hidden tests get the solution's own
layer. Each helper here does the same on both, so that one hidden test
serves both (the values' counterparts are in autograder.testkernel.testing).
"""

from __future__ import annotations

import numpy as np

from autograder.testkernel.testing import to_numpy

__all__ = [
    "call_method",
    "calls",
    "check_config",
    "class_paths",
    "describe",
    "explain",
    "is_keras_layer",
    "read_weights",
    "set_sublayer_weights",
    "set_weights",
    "sublayer",
    "sublayers",
]


def _class_path(kind) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def describe(target, sublayers: bool = True) -> dict:
    """``target.describe()`` of a proxy, or the same description of a local object:
    {"class", "bases", "sublayers": [{"name", "class", "bases"}, ...]}.

    ``sublayers=False`` leaves a local object's sublayers out (the list is
    empty) where only its class and bases are read; a proxy always lists them.
    """
    from autograder.kernels.probe import RemoteObject

    if isinstance(target, RemoteObject):
        return target.describe()
    kind = target if isinstance(target, type) else type(target)
    description: dict = {"class": _class_path(kind),
                         "bases": [_class_path(base) for base in kind.__mro__[1:]],
                         "sublayers": []}
    flatten = getattr(target, "_flatten_layers", None)
    if sublayers and callable(flatten) and not isinstance(target, type):
        for layer in flatten(include_self=False, recursive=True):
            description["sublayers"].append({
                "name": getattr(layer, "name", ""),
                "class": _class_path(type(layer)),
                "bases": [_class_path(base) for base in type(layer).__mro__[1:]],
            })
    return description


def class_paths(target) -> list[str]:
    """"module.Class" of ``target`` and of its base classes (proxy or local object)."""
    description = describe(target, sublayers=False)
    return [description.get("class", ""), *description.get("bases", [])]


def is_keras_layer(target, class_name: str) -> bool:
    """Whether ``target`` is a Keras ``class_name`` (e.g. "MultiHeadAttention")
    or a subclass of it."""
    return any(path.startswith("keras.") and path.endswith("." + class_name)
               for path in class_paths(target))


def explain(message: str, shapes_hint: str = "") -> str:
    """A hint to append to a student's exception from a layer call.

    Keras's own messages for the classic mask mistakes are cryptic; name the
    cause. ``shapes_hint`` is added when the message is about shapes.
    """
    if "query_mask" in message:
        return (" Pass masks to MultiHeadAttention by keyword (attention_mask=...): "
                "its fourth positional argument is query_mask.")
    if "must be broadcastable" in message:
        return (" The attention mask must broadcast to (B, T_q, T_k): a padding mask "
                "(B, T) becomes (B, 1, T).")
    if shapes_hint and "shape" in message.lower():
        return " " + shapes_hint
    return ""


def _is_remote(layer) -> bool:
    """Whether ``layer`` is the grader's proxy of a student's layer
    (autograder.kernels.probe.RemoteObject), which walks a path in one request."""
    return callable(getattr(type(layer), "call_method", None))


def sublayer(layer, path: str):
    """``layer.ffn.dense1`` for the path "ffn.dense1"."""
    if _is_remote(layer):
        return layer.attribute(path)
    for name in path.split("."):
        layer = getattr(layer, name)
    return layer


def calls(layer, requests) -> list:
    """``[sublayer(layer, path) if args is None else sublayer(layer, path)(*args)
    for path, args in requests]``: for a proxy in one round trip (a failure
    names the path that failed), e.g. ``[("norm1.epsilon", None),
    ("ffn.dense1.get_weights", ())]``."""
    if _is_remote(layer):
        return layer.many(requests)
    return [sublayer(layer, path) if args is None else sublayer(layer, path)(*args)
            for path, args in requests]


def sublayers(layer, paths) -> list:
    """``[sublayer(layer, path) for path in paths]``, in one round trip."""
    return calls(layer, [(path, None) for path in paths])


def call_method(target, name: str, *args, **kwargs):
    """``target.name(*args, **kwargs)`` in one round trip for a proxy."""
    from autograder.kernels.probe import RemoteObject

    if isinstance(target, RemoteObject):
        return target.call_method(name, *args, **kwargs)
    return getattr(target, name)(*args, **kwargs)


def set_weights(layer, weights: dict) -> None:
    """``sublayer(layer, path).set_weights(value)`` for each ``{path: value}``,
    in one round trip."""
    calls(layer, [(f"{path}.set_weights", (value,)) for path, value in weights.items()])


def set_sublayer_weights(layer, path: str, weights) -> None:
    """``sublayer(layer, path).set_weights(weights)``."""
    set_weights(layer, {path: weights})


def read_weights(layer, paths) -> dict[str, list[np.ndarray]]:
    """``{path: sublayer.get_weights()}`` for each path, in one round trip."""
    values = calls(layer, [(f"{path}.get_weights", ()) for path in paths])
    return {path: [to_numpy(w) for w in value] for path, value in zip(paths, values)}


def _config_differences(config: dict, arguments: dict) -> str:
    """Each argument ``config`` does not hold as passed, with what was expected
    ("dff=None, expected 12; no dropout_rate, expected 0.5"); "" when none."""
    return "; ".join(
        (f"{name}={config[name]!r}, expected {value!r}" if name in config
         else f"no {name}, expected {value!r}")
        for name, value in arguments.items() if config.get(name) != value)


def check_config(layer_class, arguments: dict, what: str) -> None:
    """``layer_class(**arguments).get_config()`` holds every argument under its
    own name, and ``from_config`` of it builds a layer with the same ones;
    AssertionError (the student's feedback, naming each argument held wrong and
    the value expected) otherwise. ``layer_class``: the student's class (a proxy
    under the grader)."""
    layer = layer_class(**arguments)
    try:
        config = call_method(layer, "get_config")
    except Exception as error:  # noqa: BLE001 - the student's get_config raised
        raise AssertionError(
            f"{what}: get_config() raised {type(error).__name__} ({str(error)[:300]}); "
            "return super().get_config() with every constructor argument added under its "
            "own name.") from None
    if not isinstance(config, dict):
        raise AssertionError(f"{what}: get_config() returned {type(config).__name__}, "
                             "expected a dict.")
    wrong = _config_differences(config, arguments)
    if wrong:
        raise AssertionError(
            f"{what}: get_config() gives {wrong}; store each constructor argument under "
            "its own name and add it to super().get_config().")
    rebuilt = call_method(layer_class, "from_config", config)
    again = call_method(rebuilt, "get_config")
    wrong = _config_differences(again if isinstance(again, dict) else {}, arguments)
    if wrong:
        raise AssertionError(f"{what}: from_config(get_config()) built a layer whose "
                             f"get_config() gives {wrong}.")
