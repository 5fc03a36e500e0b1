"""The student kernel's end of the probe protocol (``glue.py``), and the protocol itself.

Nothing here is imported by the grader: ``glue.py`` is read as text by the
test kernel (autograder.kernels.probe) and executed inside the sandboxed
student kernel, which cannot import the kit (its checkout is hidden there).
This docstring is the one specification of what the two ends exchange;
``probe.StudentKernel.request`` and ``glue.handle`` implement it.

Transport
    The exchange folder (made by the grader before the notebook runs; the
    test kernel reaches it through one directory descriptor, never through
    a link, and writes only new files). One request is a call of a Jupyter
    *user expression* in the student kernel (not executed code: it bypasses
    the notebook's input transformers and hooks) that runs the kept
    ``handle(request_path, globals())``. Requests are sequential.

    Serving (the usual way since issue 34): a tests cell's first request
    instead starts ``serve(requests_pipe, answers_pipe, globals())`` with one
    user expression. The two pipes are FIFOs the test kernel makes in the
    exchange folder (``<nonce>-serve-<n>.requests`` and ``.answers``). Each
    request is then one line on the requests pipe, the request file's path,
    served by ``handle`` as above; the request's name (``<nonce>-<n>``)
    follows its answer on the answers pipe. An empty line, or the pipe's
    end, stops serving (``StudentKernel.end_cell``, after each tests cell),
    so that the notebook's next cell can run. Whatever goes wrong with the
    pipes, the test kernel sends the rest of that submission's requests
    one user expression each.

Request: ``<nonce>-<n>.request.json``
    ``op``          one of ``call``, ``getattr``, ``callmethod``, ``many``,
                    ``describe``, ``construct``;
    ``target``      ``{"name": <exercise name>}`` (from the notebook's
                    namespace) or ``{"id": <n>}`` (an object kept from an
                    earlier answer);
    ``attr``        a dotted attribute path (``getattr``, ``callmethod``), or
                    the name to build (``construct``);
    ``args``, ``kwargs``  encoded values (below); for ``many``, ``args`` is
                    ``[[path, args or None], ...]``, served in order;
    ``stand_ins``   ``{name: code}``: correct versions of the other
                    exercises, bound in the notebook's namespace for this
                    request only, then restored;
    ``code``        a grader fixture (``construct``);
    ``magic``       the test kernel's ``importlib.util.MAGIC_NUMBER`` (hex):
                    shipped code is ``marshal``-ed bytecode, base64, without
                    docstrings, never source, and runs only under the same
                    Python;
    ``arrays``      the path of ``<stem>.args.npz`` when ``args`` hold arrays;
    ``answer``      where to write the answer.

Encoded values (both directions)
    ``{"t": "plain", "v": None | bool | int | float | str}``,
    ``{"t": "list" | "tuple", "v": [...]}``, ``{"t": "dict", "v": {str: ...}}``,
    ``{"t": "array", "key": k}`` (a NumPy array in the .npz beside the JSON),
    ``{"t": "tensor", "key": k}`` (test kernel to student only: made a
    backend tensor there), ``{"t": "ref", "id": n, "type": name}`` (an object
    that stays in the student kernel: a layer, a bound method).

Answer: ``<stem>.answer.json`` (written whole, then renamed into place)
    ``{"ok": true, "value": <encoded>, "arrays": <path or absent>,
    "seconds": <how long the operation ran>}`` or
    ``{"ok": false, "type": <exception class>, "message": ..., "traceback":
    ..., "index": <the failing entry of a many request>}``. Arrays come back
    in ``<stem>.answer.json.npz``; the test kernel reads that name whatever
    the answer says. ``seconds`` feeds the benchmark's profile only
    (StudentKernel.profile), never a grade.

Callbacks: the grader's objects that stay in the test kernel
    A hidden test may hand a student function a grader's object without
    sending it (``StudentKernel.host``: lab 6's language models): it is
    encoded ``{"t": "hosted", "id": n}`` and arrives as a proxy whose only
    operation is a call (its attributes can be neither read nor set). Each
    call, while the request runs, writes ``cb-<k>.call.json`` (whole, then
    renamed; arrays in ``cb-<k>.call.npz``) with ``id``, ``args``,
    ``kwargs`` (data and ``hosted`` handles only) and waits for
    ``cb-<k>.reply.json``, which the test kernel writes (``.reply.npz``
    beside it) while it waits for the request's answer: ``{"ok": true,
    "value": <encoded>}`` (``tensor`` values become backend tensors; what is
    not data, such as a cache, comes back as a new ``hosted`` handle that
    only the test kernel can resolve) or ``{"ok": false, "type":
    "ValueError" | "TypeError" | "RuntimeError", "message": ...}``, raised in
    the student's code. The test kernel calls nothing but hosted objects, with
    nothing but data it has checked (probe.wire.MAX_HOSTED_CALL_BYTES), so the
    object, its state and its log are the grader's own.

Keras layers built while a request runs
    Keras builds a layer with no ``build()`` of its own by a first run of
    its ``call()`` on symbolic inputs (a trace), then calls it. While a
    request runs, the call for the answer builds it, on the inputs given,
    eagerly, and the default ``build()`` follows (glue._eager_builds: one
    run of ``call()``; the same weights, names, order and locked state;
    Keras's own trace where the eager run raises). Under TensorFlow its
    variables' handles are made outside the layer's name scope
    (glue._unscoped_variables: TensorFlow's kernel cache then answers;
    Keras's names and paths are the same). Between requests, the student's
    own cells get Keras as it is.

What the test kernel trusts of an answer
    Nothing but data: the JSON is capped (probe.wire.MAX_ANSWER_JSON_BYTES),
    the arrays are checked by their .npy headers before they are read
    (numbers only, probe.wire.MAX_ANSWER_BYTES in all,
    ``allow_pickle=False``), messages are redacted before a feedback page
    shows them (probe.messages.redact), and a request that does not return
    within the call timeout interrupts the student kernel by a control
    message.
"""
