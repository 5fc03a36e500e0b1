"""Answers that should not pass: text arrays, compressed and flooding answers, leaked inputs (issue 18: 1, 4, 5, 7, 8)."""

from __future__ import annotations

import json
import re

import nbformat
from pathlib import Path

from tests.hostile.cases import CORRECT, Case, feedback_of, lab_notebook, notebook, with_cell
from tests.hostile.machine import graded_text

# -- 1. text arrays --------------------------------------------------------------

TEXT_DOT = '''
def dot_scores(query, keys):
    return np.full(np.asarray(keys).shape[:-1], "nan")      # text, not numbers
'''

BYTES_BILINEAR = '''
def bilinear_scores(query, keys, W):
    return np.full(np.asarray(keys).shape[:-1], b"nan")     # bytes, not numbers
'''

#: Appended to a lab's solution of a layer: the layer computes its output,
#: then returns it as text of the same shape.
AS_TEXT = '''

_Numeric{name} = {name}


class {name}(_Numeric{name}):
    def __call__(self, *args, **kwargs):
        output = super().__call__(*args, **kwargs)
        return np.full(tuple(output.shape), "nan")
'''


def _text_layer(lab_id: str, name: str):
    from tests.verdicts import solution_answers

    source = solution_answers(lab_id)[name]
    if "import numpy as np" not in source:
        source = "import numpy as np\n" + source
    return lab_notebook(lab_id, {name: source + AS_TEXT.format(name=name)})


def _says_numbers_expected(out: Path, row: dict) -> str:
    page = feedback_of(out, row["student_id"])
    if "float" not in page or "text" not in page:
        return "the feedback does not say that text came back where numbers were expected"
    return ""


# -- 4. hidden inputs in messages -----------------------------------------------

LEAK_REPR = '''
def dot_scores(query, keys):
    keys = np.asarray(keys)
    if keys.ndim > 2:                      # the hidden test's batched inputs
        print(repr(keys))
        raise ValueError(repr(keys) + " " + repr(np.asarray(query)))
    return keys @ np.asarray(query)
'''

#: The same inputs as hexadecimal bytes, as integers (scaled), and in the
#: file name of the code that raises (which shows in the traceback).
LEAK_ENCODED = '''
def dot_scores(query, keys):
    keys = np.asarray(keys)
    if keys.ndim > 2:
        hexed = keys.tobytes().hex()
        scaled = " ".join(str(int(v * 1e6)) for v in keys.ravel())
        code = compile("raise ValueError(message)", "/tmp/ipykernel_1/" + hexed[:200], "exec")
        exec(code, {"message": hexed + " | " + scaled})
    return keys @ np.asarray(query)
'''

#: Five or more numbers in a row, any notation (float literals, scaled
#: integers), or a long run of hexadecimal digits: what a page showing the
#: hidden inputs holds, and a page of shapes and short messages does not.
_NUMBER = r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+)"
NUMBER_RUN = re.compile(rf"{_NUMBER}(?:[\s,;|\[\]()]+{_NUMBER}){{5,}}", re.I)
HEX_RUN = re.compile(r"[0-9a-f]{32,}", re.I)


def _no_inputs_shown(out: Path, row: dict) -> str:
    page = feedback_of(out, row["student_id"])
    if not page:
        return "no feedback page"
    if "dot_scores" not in page:
        return "the feedback does not name dot_scores"
    for pattern in (NUMBER_RUN, HEX_RUN):
        found = pattern.search(page)
        if found:
            return f"the feedback shows what looks like the inputs: {found.group(0)[:80]!r}"
    return ""


# -- 5. the stand-ins' sources ------------------------------------------------------

#: An EncoderLayer that, when the grader calls it, gathers every trace of
#: the stand-ins it can find (the exchange folder's request files, the
#: calling frames' locals, the stand-in FeedForward's source and code
#: objects) and raises with it all.
STEALS_STAND_INS = '''
import glob, inspect, json, sys, types

_Honest = EncoderLayer


def _strings(code, found):
    for const in code.co_consts:
        if isinstance(const, str):
            found.append(const)
        elif isinstance(const, types.CodeType):
            _strings(const, found)
    return found


def _loot():
    found = []
    names = ("FeedForward", "causal_mask", "padding_mask", "combine_masks", "masked_softmax")
    for name in names:
        try:
            found.append(inspect.getsource(globals().get(name)))
        except Exception:
            pass
    requests = []
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, dict) and "stand_ins" in value:
                requests.append(value)
        frame = frame.f_back
    for pattern in ("/tmp/*/ipc/exchange/*.request.json", "/tmp/*/*/ipc/exchange/*.request.json"):
        for path in glob.glob(pattern)[:20]:
            try:
                requests.append(json.load(open(path, encoding="utf-8")))
            except (OSError, ValueError):
                pass
    for request in requests:
        for shipped in list(request.get("stand_ins", {}).values()) + [request.get("source"),
                                                                      request.get("code")]:
            if not isinstance(shipped, str):
                continue
            found.append(shipped)                   # as it was sent
            try:
                import base64, marshal
                found.append(repr(_strings(marshal.loads(base64.b64decode(shipped)), [])))
            except Exception:
                pass
    for name in names:
        target = globals().get(name)
        for item in [target] + list(vars(target).values() if isinstance(target, type) else []):
            if getattr(item, "__doc__", None):
                found.append(item.__doc__)
            code = getattr(item, "__code__", None)
            if code is not None:
                found.append(repr(_strings(code, [])))
    return "\\n".join(found)


class EncoderLayer(_Honest):
    def __call__(self, *args, **kwargs):         # past Keras's wrapping of messages
        if any(frame.filename == "<autograder>" for frame in inspect.stack(0)):
            raise RuntimeError(_loot())
        return super().__call__(*args, **kwargs)
'''


def _reference_lines(lab_id: str) -> list[str]:
    """The lines of ``lab_id``'s stand-ins' sources worth stealing (not
    blank, not a lone bracket or keyword)."""
    from autograder.labs import lab_folder
    from autograder.testkernel import standins

    lines = set()
    for source in standins.sources(lab_folder(lab_id)).values():
        for line in source.splitlines():
            line = line.strip()
            if len(line) >= 20:
                lines.add(line)
    return sorted(lines)


def _no_reference_line(out: Path, row: dict) -> str:
    page = feedback_of(out, row["student_id"])
    if not page:
        return "no feedback page"
    import html

    text = html.unescape(page)
    shown = [line for line in _reference_lines("lab4") if line in text]
    if shown:
        return f"{len(shown)} lines of the stand-ins' sources shown, e.g. {shown[0][:70]!r}"
    return ""


# -- 7. a compressed answer ----------------------------------------------------------

#: savez_compressed in place of savez (the kernel's numpy is the student's),
#: and a broadcast view of 3.2 GB of zeros: a few MB once compressed.
COMPRESSED_DOT = '''
np.savez = np.savez_compressed

def dot_scores(query, keys):
    keys = np.asarray(keys)
    if keys.ndim > 2:
        return np.broadcast_to(np.float64(0.0), (20000, 20000))
    return keys @ np.asarray(query)
'''


# -- 8. an output flood --------------------------------------------------------------

#: Correct, but the first call by the grader (a hidden test of dot_scores)
#: starts a thread that prints 250 chunks of 4 MB and waits for it: ipykernel
#: sends what was printed in 0.2 s as one message, here 1 GB, which the
#: grader must not hold (issue 32, 6: the grader process peaked at 0.92 GiB,
#: 0.17 GiB for a correct notebook; 3.1 GiB here). A student cell after the
#: tests prints how much went out, so that the check knows the flood
#: happened. The kernel takes 5-15 s to send 1 GB, and the test's call waits
#: for it: on a loaded machine dot_scores's tests can run out of time, a
#: point the notebook costs itself (at most 10, at least 9).
FLOOD = '''
import sys, threading

_flood, _flooded = [], [0]


def _print_flood():
    chunk = "x" * (4 * 2**20)
    for _ in range(250):
        print(chunk)
        _flooded[0] += 1


def dot_scores(query, keys):
    if not _flood and sys._getframe(1).f_code.co_filename == "<autograder>":
        _flood.append(threading.Thread(target=_print_flood, daemon=True))
        _flood[0].start()
        _flood[0].join()
    return _correct(query, keys)
'''

#: The grader's peak memory while it grades the flood may exceed a correct
#: notebook's (graded in the same run) by this much at most.
FLOOD_MEMORY_MARGIN_MIB = 256


#: A cell of the flood notebook's own before the count: whatever the flood left
#: in the kernel's output buffer goes out with this cell (and is cut there), not
#: in the same message as the count (a message over the cap is dropped whole).
DRAIN = "import sys, time\nsys.stdout.flush()\ntime.sleep(0.5)\nsys.stdout.flush()"


def _flood_notebook():
    correct = CORRECT["dot_scores"].replace("def dot_scores(", "def _correct(")
    notebook = with_cell('print("FLOODED", _flooded[0], "chunks of 4 MB")', before="softmax",
                         answers={"dot_scores": correct + "\n" + FLOOD})
    at = next(index for index, cell in enumerate(notebook.cells) if "FLOODED" in cell.source)
    notebook.cells.insert(at, nbformat.v4.new_code_cell(DRAIN))
    return notebook


def _grader_memory(out: Path, student: str) -> tuple[float, float] | None:
    """The grading process's peak resident memory (MiB) while it graded
    ``student``, and its growth over what it held before (worker.peak_memory)."""
    try:
        timings = json.loads((out / "results" / f"{student}.json").read_text())["timings"]
        peak = timings["grader_peak_mib"]
        return peak, peak - timings["grader_start_mib"]
    except (OSError, ValueError, KeyError):
        return None


def _flood_not_held(out: Path, row: dict) -> str:
    text = graded_text(out, row["student_id"])
    flooded = re.search(r"FLOODED (\d+) chunks", text)
    printed = f"{flooded.group(1)} x 4 MB printed" if flooded else "no count printed"
    flood, correct = _grader_memory(out, row["student_id"]), _grader_memory(out, "flood_baseline")
    if flood is None or correct is None:
        return ("no peak memory of the grader in OUT/results/ (worker.peak_memory) for it and "
                "flood_baseline (HOSTILE_ONLY needs both)")
    print(f"\noutput_flood ({printed} during the hidden tests): grader peak {flood[0]:.0f} MiB "
          f"(+{flood[1]:.0f} MiB while grading it); a correct notebook's {correct[0]:.0f} MiB "
          f"(+{correct[1]:.0f} MiB)")
    if flood[0] > correct[0] + FLOOD_MEMORY_MARGIN_MIB \
            or flood[1] > correct[1] + FLOOD_MEMORY_MARGIN_MIB:
        return (f"the grader held the flood: peak {flood[0]:.0f} MiB (+{flood[1]:.0f}), "
                f"a correct notebook's {correct[0]:.0f} MiB (+{correct[1]:.0f})")
    if not flooded or int(flooded.group(1)) < 100:
        return f"the flood did not happen ({printed})"
    if float(row["score"]) < 9:
        return "more than the flooding exercise's point lost"
    return ""


# -- links in the exchange folder (the test kernel reads and writes there) ---------

#: Swaps the exchange folder for a link to the machine's /tmp (the test
#: kernel, outside the sandbox, would write its requests there), and links
#: every answer to /etc/shadow, a FIFO or /dev/zero.
SWAP_EXCHANGE = '''
import glob, os, threading, time
LINK_TARGET = "/tmp"
for folder in glob.glob("/tmp/**/ipc/exchange", recursive=True):
    try:
        os.rename(folder, folder + ".old")
        os.symlink(LINK_TARGET, folder)
    except OSError as error:
        print("swap refused:", error)
def plant():
    for _ in range(3000):
        for request in glob.glob("/tmp/**/exchange*/*.request.json", recursive=True):
            answer = request.replace(".request.json", ".answer.json")
            for path, target in ((answer, "/etc/shadow"), (answer + ".npz", "/dev/zero")):
                try:
                    os.symlink(target, path)
                except OSError:
                    pass
        time.sleep(0.005)
threading.Thread(target=plant, daemon=True).start()
'''


def _nothing_written_outside(out: Path, row: dict) -> str:
    planted = list(Path("/tmp").glob("*-*.request.json")) + list(Path("/tmp").glob("*.args.npz"))
    for path in planted:
        path.unlink(missing_ok=True)
    if planted:
        return f"the test kernel wrote {len(planted)} request files through the link into /tmp"
    page = feedback_of(out, row["student_id"])
    if "root:" in page:
        return "the feedback page shows /etc/shadow"
    return ""


def cases() -> list[Case]:
    return [
        Case("swaps_exchange", "secrecy", "swaps the tests' exchange folder for a link to the "
             "machine's /tmp and links answers to /etc/shadow and /dev/zero",
             lambda: notebook({"dot_scores": SWAP_EXCHANGE + CORRECT["dot_scores"]}),
             at_most=1, check=_nothing_written_outside, needs_sandbox=True),
        Case("text_answers", "forgery", "dot_scores returns np.full(shape, 'nan'), "
             "bilinear_scores b'nan'",
             lambda: notebook({"dot_scores": TEXT_DOT, "bilinear_scores": BYTES_BILINEAR}), 8,
             check=_says_numbers_expected),
        # The values cell (2.5) is lost; the weights made in build (0.5), a property
        # of the layer rather than of its output, stay (issue 32): 10.5 - 2.5.
        Case("text_embedding", "forgery", "lab3's PositionalEmbedding returns its output as text",
             lambda: _text_layer("lab3", "PositionalEmbedding"), at_most=8, lab="lab3"),
        Case("text_encoder", "forgery", "lab5's Encoder returns its output as text",
             lambda: _text_layer("lab5", "Encoder"), at_most=16, lab="lab5"),
        Case("leaks_inputs_repr", "secrecy", "dot_scores prints and raises repr() of the "
             "hidden inputs", lambda: notebook({"dot_scores": LEAK_REPR}), 9,
             check=_no_inputs_shown),
        Case("leaks_inputs_encoded", "secrecy", "dot_scores raises the hidden inputs as hex, "
             "scaled integers and a file name", lambda: notebook({"dot_scores": LEAK_ENCODED}), 9,
             check=_no_inputs_shown),
        Case("steals_stand_ins", "secrecy", "lab4's EncoderLayer raises with the exchange "
             "files, the callers' frames and the stand-ins' code",
             lambda: _steal_notebook(), at_most=13.25, lab="lab4", check=_no_reference_line),
        Case("picture_of_kept_inputs", "secrecy", "lab4's DecoderLayer keeps the hidden "
             "tests' inputs and reports them as its weights on the visible example drawn "
             "for its picture", _kept_inputs_notebook, 15.5, lab="lab4",
             check=_picture_shows_no_kept_inputs),
        Case("compressed_answer", "machine", "dot_scores returns 3.2 GB of zeros, "
             "savez_compressed to 5 MB", lambda: notebook({"dot_scores": COMPRESSED_DOT}), 9),
        Case("output_flood", "machine", "a thread prints 250 x 4 MB during the hidden tests",
             _flood_notebook, at_most=10, check=_flood_not_held),
        Case("flood_baseline", "machine", "correct answers (output_flood's measure of the "
             "grader's memory)", notebook, 10),
    ]


def _steal_notebook():
    from tests.verdicts import solution_answers

    source = solution_answers("lab4")["EncoderLayer"]
    return lab_notebook("lab4", {"EncoderLayer": source + "\n" + STEALS_STAND_INS})


# -- 6. pictures of what differs ----------------------------------------------------

#: A right DecoderLayer that keeps every input the hidden tests give it and,
#: called on the visible check's example (x (2, 4, 6)) for the picture, reports
#: them as its cross-attention weights; its get_config is broken, so that the
#: exercise loses a property (0.5) and gets a picture.
KEEPS_INPUTS = '''

_kept = []
_HonestDecoderLayer = DecoderLayer


class DecoderLayer(_HonestDecoderLayer):
    def call(self, x, context, x_padding_mask=None, context_padding_mask=None,
             training=None):
        output = super().call(x, context, x_padding_mask, context_padding_mask,
                              training=training)
        if tuple(x.shape) == (2, 4, 6) and _kept:
            kept = np.concatenate([np.ravel(v) for v in _kept])
            self.last_attention_scores = np.resize(kept, (2, 2, 4, 5)).astype("float32")
        else:
            _kept.extend([np.asarray(x), np.asarray(context)])
        return output

    def get_config(self):
        return {}
'''


def _kept_inputs_notebook():
    from tests.verdicts import solution_answers

    source = solution_answers("lab4")["DecoderLayer"]
    if "import numpy as np" not in source:
        source = "import numpy as np\n" + source
    return lab_notebook("lab4", {"DecoderLayer": source + KEEPS_INPUTS})


#: A number with decimals: what a picture that showed values would hold.
_DECIMAL = re.compile(r"\d\.\d")


def _picture_shows_no_kept_inputs(out: Path, row: dict) -> str:
    """The picture is drawn (the layer lost a property) and shows no number of
    the student's: colours of the fixed scale only, no decimal anywhere in it."""
    from autograder.grader.pictures import pictures_in

    pictures = pictures_in(feedback_of(out, row["student_id"]))
    if not pictures:
        return "no picture on the page (DecoderLayer lost a property)"
    for picture in pictures:
        for pattern in (NUMBER_RUN, HEX_RUN, _DECIMAL):
            found = pattern.search(picture)
            if found:
                return f"the picture shows what looks like values: {found.group(0)[:80]!r}"
    from autograder.grader.pictures import palette_fills

    fills = set(re.findall(r'fill="(#[0-9a-f]{6})"', " ".join(pictures)))
    if not fills <= palette_fills():
        return f"the picture has colours off its scale: {sorted(fills - palette_fills())[:5]}"
    return ""
