"""Proxies for the student's functions and layers, used by hidden tests.

Hidden tests run in the grader's test kernel, a clean process that never
runs student code. There, each exercise name is bound to a `RemoteObject`:
calling it sends the arguments (NumPy arrays, numbers, strings, None, lists,
tuples, dicts, other remote objects) to the student's kernel, which runs the
student's code and sends back plain data. Objects that are not data (a
layer, a bound method) stay in the student's kernel and come back as new
remote objects, so `layer = MultiHeadAttention(2, 4); layer(x, x)` works.

While an exercise is tested, the other exercises it may call are replaced in
the student's kernel by correct stand-ins (autograder.testkernel.standins), so
that a mistake costs points in one exercise only. Stand-ins and grader
fixtures are compiled here and sent as code objects (ship_code), never as
source; what comes back is checked before it is read (read_arrays: numbers
only, sizes by the .npy headers) and the student's exception messages are
redacted before they reach a feedback page (redact).

The requests and answers are specified in one place, the docstring of
autograder/studentkernel/__init__.py; glue.py is the other end.

The modules:

* `client`: StudentKernel, the test kernel's client of one student's kernel
  (binding names, requests, the profile, the callbacks to hosted objects).
* `transports`: how a request reaches the student's kernel and its answer is
  awaited, behind one interface (Transport: call, end_cell, close), chosen
  once by StudentKernel: ExecuteTransport (`grade --plain`: an execute
  request a call) or PipeTransport (a tests cell's calls on a pipe the glue
  serves, GLUE_SERVE); the glue's source and user expressions (GLUE_CALL).
* `wire`: the wire format: values and arrays encoded and decoded,
  RemoteObject, HostedObject, Tensor, ship_code and MAGIC, read_arrays and
  the caps on an answer (MAX_ANSWER_BYTES, MAX_ANSWER_JSON_BYTES,
  MAX_HOSTED_CALL_BYTES).
* `messages`: a student's failure as their page shows it: redact,
  hide_data, _describe_failure (MAX_MESSAGE_CHARS).
* `exchange`: the exchange folder, reached through one descriptor.
* `errors`: StudentCodeError and GraderFault.

The limits and MAGIC are read from their module at each use: a test lowers
them there (``monkeypatch.setattr(wire, "MAX_ANSWER_BYTES", ...)``), not on
this package, which re-exports only the names other code imports or names
(glue.py's comments name probe.GLUE_CALL and probe.GLUE_SERVE; its text is
sent to the student's kernel, so it stays as it is).
"""

from autograder.kernels.probe.client import StudentKernel
from autograder.kernels.probe.errors import GraderFault, StudentCodeError
from autograder.kernels.probe.messages import hide_data, redact
from autograder.kernels.probe.transports import GLUE_CALL, GLUE_SERVE
from autograder.kernels.probe.wire import HostedObject, RemoteObject, Tensor, read_arrays, ship_code

__all__ = ["GLUE_CALL", "GLUE_SERVE", "GraderFault", "HostedObject", "RemoteObject",
           "StudentCodeError", "StudentKernel", "Tensor", "hide_data", "read_arrays", "redact",
           "ship_code"]
