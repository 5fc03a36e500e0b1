"""``labkit.start_keras()``: Keras started without TensorFlow's start-up notices.

TensorFlow 2.21 writes two lines to the process's stderr (file descriptor 2,
from C++, not through Python) when it is imported, and again at its first
operation, whatever ``TF_CPP_MIN_LOG_LEVEL`` says:

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795928538.452718   27154 port.cc:153] oneDNN custom operations are on. ...

They say nothing about the lab, but a "WARNING" under the setup cell worries a
student. The labs' setup cells call ``start_keras()`` before ``import keras``:
it imports Keras and runs one tiny operation with file descriptor 2 written to
a temporary file, then passes every line on to stderr except those start-up
notices (``STARTUP_NOISE``). A real error (an ImportError, a failing device)
is raised or printed as before.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

__all__ = ["start_keras", "STARTUP_NOISE"]

#: TensorFlow's C++ start-up notices (and nothing else): absl's notice before
#: its log is set up, oneDNN's INFO line, and the CPU-feature INFO lines.
STARTUP_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I\d{4} [^\n]*\] oneDNN custom operations are on\.[^\n]*"
    r"|I\d{4} [^\n]*cpu_feature_guard[^\n]*"
    r"|To enable the following instructions:[^\n]*in other operations, rebuild TensorFlow[^\n]*"
    r")$")


def passed_on(text: str) -> str:
    """``text`` without the lines ``STARTUP_NOISE`` matches (the others kept, in order)."""
    kept = [line for line in text.splitlines() if not STARTUP_NOISE.match(line)]
    return "".join(line + "\n" for line in kept)


def start_keras():
    """Import Keras and run its first operation with TensorFlow's start-up notices
    left out of stderr; return the keras module. Safe to call twice (the second
    call only returns the module), and on any backend."""
    if "keras" in sys.modules:
        return sys.modules["keras"]
    try:
        capture = tempfile.TemporaryFile()
        saved = os.dup(2)
    except OSError:  # no temporary file or descriptor here: start Keras as it comes
        import keras
        return keras
    try:
        sys.stderr.flush()
        os.dup2(capture.fileno(), 2)
        try:
            import keras

            keras.ops.convert_to_numpy(keras.ops.ones((1,)))  # the first operation
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
        capture.seek(0)
        text = passed_on(capture.read().decode("utf-8", errors="replace"))
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()
    finally:
        os.close(saved)
        capture.close()
    return keras
