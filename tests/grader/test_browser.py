"""The pages the kit writes, as a browser shows them (issue 48, item 4).

Headless Chromium (Debian's package: `make chromium` installs it; `make test`
does) opens a feedback page of each lab and each lab's report.html, graded
from the demo's samples, at 1280 px and at 390 px wide (a phone), driven over
the DevTools protocol (websocket-client). On each page:

- every picture loads: each <img> decoded with a size, each <svg> drawn with
  a size (every <details> fold opened first);
- nothing runs off the page: the page does not scroll sideways, no element
  reaches past the viewport unless a box that scrolls or clips holds it, and
  at 390 px the page lays out at 390 px (a viewport meta tag);
- no terminal escape code (ESC[, ?[1m, [0m) and no "(cut)" inside a word
  reaches the text the student reads (document.body.innerText);
- no request leaves the page: only the page's own file, data: and about:
  URLs load (any other is blocked and reported).

`make test` runs lab 4's pages (its `grace` and `bob`: about a minute, the
grading included) and the checker's own tests (seconds); `make test-browser`
runs every lab's (marker browser), the six labs graded at once: 2 to 3
minutes on two cores shared with other work.
BROWSER_SCREENSHOTS=docs/screenshots make test-browser writes the
README's screenshots (lab 4's grace and report, at 390 and 1280 px).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: The sample of each lab whose feedback page is checked: one that fails an
#: exercise with a matrix answer (attention weights, masks, positional tables,
#: rotary outputs), so the page holds messages and, where the kit draws them,
#: heatmaps. Lab 4 grades `bob` too (two rows in its report).
SAMPLES = {"lab1": ["carol"], "lab2": ["carol"], "lab3": ["bob"], "lab4": ["grace", "bob"],
           "lab5": ["grace"], "lab6": ["erin"]}
#: Samples whose feedback page shows a picture of what differs (issue 48, item 3).
PICTURED = {("lab4", "grace"): "the heatmap of DecoderLayer's cross-attention weights"}
#: The lab that `make test` checks; the others are marker browser (make test-browser).
MAKE_TEST_LAB = "lab4"
WIDTHS = (1280, 390)
SCREENSHOTS = os.environ.get("BROWSER_SCREENSHOTS")

#: How a browser is found; `make chromium` installs Debian's.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


needs_browser = pytest.mark.skipif(
    find_browser() is None,
    reason="Chromium not found: `make chromium` installs it (Debian's package; make test does)")


# -- the browser ---------------------------------------------------------------------------------
class Browser:
    """A headless Chromium, driven over the DevTools protocol: one tab, opened
    anew for each page (`check`)."""

    def __init__(self, executable: str):
        import websocket  # websocket-client, the dev extra

        self.profile = tempfile.mkdtemp(prefix="labkit-chromium-")
        arguments = [executable, "--headless=new", "--remote-debugging-port=0",
                     f"--user-data-dir={self.profile}", "--no-first-run",
                     "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--disable-dev-shm-usage", "--mute-audio",
                     "--hide-scrollbars", "--font-render-hinting=none", "about:blank"]
        if os.geteuid() == 0:          # Chromium's own sandbox refuses to start as root
            arguments.insert(1, "--no-sandbox")
        self.process = subprocess.Popen(arguments, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"Chromium did not start: {self.process.stderr.read()[-2000:]}")
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        self.socket = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=60,
                                                  suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        self.replies: dict[int, dict] = {}

    def close(self) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def post(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        """Call ``method`` without waiting; its id (`send` waits)."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        return self.next_id

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Call ``method``; its result (events that arrive meanwhile are kept)."""
        wanted = self.post(method, params, session)
        while wanted not in self.replies:
            self._receive()
        reply = self.replies.pop(wanted)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _receive(self) -> None:
        reply = json.loads(self.socket.recv())
        if "method" in reply:
            self.events.append(reply)
        else:
            self.replies[reply["id"]] = reply

    def event(self) -> dict:
        """The next event (method and params) of any tab."""
        while not self.events:
            self._receive()
        return self.events.pop(0)

    def check(self, page: Path, width: int, screenshot: Path | None = None) -> dict:
        """Open ``page`` at ``width`` px; what `PAGE_CHECK` finds, plus
        ``requests``: the URLs it asked for that are not its own."""
        url = page.resolve().as_uri()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        try:
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": 900, "deviceScaleFactor": 1,
                       "mobile": width < 600}, session)
            for domain in ("Page", "Network", "Runtime"):
                self.send(f"{domain}.enable", {}, session)
            self.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session)
            navigation = self.post("Page.navigate", {"url": url}, session)
            requests: list[str] = []

            def own(seen: str) -> bool:
                return seen.split("#")[0] == url or seen.startswith(("data:", "about:"))

            loaded = False
            deadline = time.monotonic() + 60
            while not loaded:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{page} did not load in 60 s")
                event = self.event()
                if event.get("sessionId") != session:
                    continue
                method, params = event["method"], event.get("params", {})
                if method == "Fetch.requestPaused":
                    seen = params["request"]["url"]
                    if own(seen):
                        self.send("Fetch.continueRequest", {"requestId": params["requestId"]},
                                  session)
                    else:      # nothing leaves the machine, even while the test fails
                        requests.append(seen)
                        self.send("Fetch.failRequest", {"requestId": params["requestId"],
                                                        "errorReason": "BlockedByClient"}, session)
                elif method == "Network.requestWillBeSent":
                    seen = params["request"]["url"]
                    if not own(seen):
                        requests.append(seen)
                elif method == "Page.loadEventFired":
                    loaded = True
            navigated = self.replies.pop(navigation, {}).get("result", {})
            if navigated.get("errorText"):
                raise RuntimeError(f"{page} did not open: {navigated['errorText']}")
            if screenshot is not None:    # as the student first sees it: folds closed
                height = self.send("Page.getLayoutMetrics", {}, session)["cssContentSize"]["height"]
                self.send("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": int(height) + 1, "deviceScaleFactor": 1,
                           "mobile": width < 600}, session)
                image = self.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
                save_small_png(base64.b64decode(image), screenshot)
                self.send("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": 900, "deviceScaleFactor": 1,
                           "mobile": width < 600}, session)
            found = self.send("Runtime.evaluate", {"expression": f"({PAGE_CHECK})({width})",
                                                   "returnByValue": True}, session)
            found = json.loads(found["result"]["value"])
            found["requests"] = sorted(set(requests))
            return found
        finally:
            self.send("Target.closeTarget", {"targetId": target})


#: Run in the page once it has loaded: opens every fold, then measures.
PAGE_CHECK = r"""
((width) => {
  for (const fold of document.querySelectorAll('details')) fold.open = true;
  const name = e => {
    let text = e.tagName.toLowerCase();
    const classes = e.getAttribute('class');
    if (classes) text += '.' + classes.trim().split(/\s+/).join('.');
    const words = (e.textContent || '').trim().replace(/\s+/g, ' ');
    return words ? `${text} "${words.slice(0, 50)}"` : text;
  };
  const heldInBox = e => {
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  };
  // each element whose box or text reaches past the window, outside any box
  // that scrolls or clips it; the innermost ones are named (their parents repeat them)
  const off = [];
  for (const e of document.body.querySelectorAll('*')) {
    const box = e.getBoundingClientRect();
    if ((box.width === 0 && box.height === 0) || heldInBox(e)) continue;
    const text = getComputedStyle(e).overflowX === 'visible' ? box.left + e.scrollWidth : 0;
    const right = Math.max(box.right, text);
    if (right > width + 1 || box.left < -1) off.push([e, box.left, right]);
  }
  const wide = off.filter(([e]) => !off.some(([other]) => other !== e && e.contains(other)))
    .map(([e, left, right]) => `${name(e)} spans ${Math.round(left)}..${Math.round(right)} px`);
  // table cells of one word (a name, a header) broken across lines (`problems` judges them)
  const split = [];
  for (const cell of document.querySelectorAll('td, th')) {
    const words = cell.innerText.trim();
    if (!words || /\s/.test(words)) continue;
    const tops = [];
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const box of range.getClientRects()) if (box.width > 0) tops.push(box.top);
    }
    const lines = new Set(tops.map(top => Math.round(top / 4))).size;
    if (lines > 1) split.push({cell: `${name(cell)} (${cell.getBoundingClientRect().width.toFixed(0)} px wide)`,
                               characters: words.length, lines: lines});
  }
  const pictures = [], broken = [];
  for (const img of document.querySelectorAll('img')) {
    const box = img.getBoundingClientRect();
    const src = (img.getAttribute('src') || '').slice(0, 60);
    pictures.push('img ' + src);
    if (!img.complete || img.naturalWidth === 0) broken.push(`img ${src}: did not load`);
    else if (box.width === 0 || box.height === 0) broken.push(`img ${src}: drawn 0 px`);
  }
  for (const svg of document.querySelectorAll('svg')) {
    if (svg.parentElement.closest('svg')) continue;
    const box = svg.getBoundingClientRect();
    const label = 'svg ' + (svg.getAttribute('aria-label') || '');
    pictures.push(label);
    if (box.width === 0 || box.height === 0) broken.push(`${label}: drawn 0 px`);
  }
  return JSON.stringify({
    width: window.innerWidth, scrollWidth: document.documentElement.scrollWidth,
    viewport: document.querySelector('meta[name="viewport"]') !== null,
    wide: wide.slice(0, 10), split: split, pictures: pictures, broken: broken,
    text: document.body.innerText,
  });
})
"""


def save_small_png(data: bytes, path: Path) -> None:
    """``data`` (a PNG) written to ``path`` in 64 colours, a fraction of the size;
    a report, longer than a screenshot needs, is cut after its first charts."""
    import io

    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.open(io.BytesIO(data)).convert("RGB")
    tallest = 2400 if path.name.startswith("report") else 4800
    image = image.crop((0, 0, image.width, min(image.height, tallest)))
    image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


# -- what a page must not show -------------------------------------------------------------------
#: A terminal escape sequence, whole or with its ESC byte replaced ("?[1m") or dropped ("[0m").
ESCAPE = re.compile(r"\x1b|\x9b|\[\d+(?:;\d+)*m(?![a-z])")
#: "(cut)" and the word before it (after an ellipsis, if any).
CUT = re.compile(r"([\w.'-]+)(?:…|\.\.\.)?[ \u00a0]?\(cut\)")
WORD = re.compile(r"[\w]+(?:[-'][\w]+)*")


def cut_inside_words(text: str, vocabulary: set[str]) -> list[str]:
    """Each "(cut)" in ``text`` that follows part of a word: a word that is
    neither a whole word of ``text`` (outside the cuts) nor of ``vocabulary``,
    but begins one of them ("x_paddin… (cut)" where ``x_padding_mask`` is a word)."""
    words = set(WORD.findall(CUT.sub(" ", text))) | vocabulary
    found = []
    for match in CUT.finditer(text):
        stem = WORD.findall(match.group(1))
        if not stem:
            continue
        last = stem[-1]
        if last not in words and any(word.startswith(last) and word != last for word in words):
            found.append(text[max(match.start() - 30, 0):match.end()].replace("\n", " "))
    return found


def problems(found: dict, width: int, vocabulary: set[str] = frozenset()) -> list[str]:
    """What is wrong with a page that `Browser.check` measured at ``width`` px."""
    wrong = []
    if not found["viewport"]:
        wrong.append("no viewport meta tag (width=device-width): a phone lays the page out "
                     f"{found['width']} px wide and shrinks it")
    elif found["width"] != width:
        wrong.append(f"the page lays out {found['width']} px wide in a {width} px window: "
                     f"something wider than the window makes a phone shrink the page")
    if found["scrollWidth"] > found["width"]:
        wrong.append(f"the page scrolls sideways: {found['scrollWidth']} px wide "
                     f"in a {found['width']} px window")
    wrong += [f"runs off the page: {element}" for element in found["wide"]]
    # A table cell of one word (a name, a header): whole on a wide screen ("causal_ma / sk"
    # reads badly); on a phone a name longer than its column may break, but the column is
    # never a few letters wide ("ca / us / al").
    wrong += [f"one word broken across lines: {split['cell']}" for split in found["split"]
              if width >= 600 or split["characters"] / split["lines"] < 8][:10]
    wrong += [f"picture: {picture}" for picture in found["broken"]]
    text = found["text"]
    for match in ESCAPE.finditer(text):
        wrong.append(f"escape code in the text: {text[max(match.start() - 30, 0):match.end() + 30]!r}")
    wrong += [f"cut inside a word: {where!r}" for where in cut_inside_words(text, vocabulary)]
    wrong += [f"external request: {url}" for url in found["requests"]]
    return wrong


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    executable = find_browser()
    if executable is None:
        pytest.skip("Chromium not found: `make chromium` installs it (Debian's package; "
                    "make test does)")
    chromium = Browser(executable)
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory) -> dict[str, Path | str]:
    """lab -> its OUT folder (or why its grading failed): the labs this run's tests of this module need, their
    samples (`SAMPLES`) graded through the CLI at once, one process a lab."""
    labs = sorted({item.callspec.params["lab"] for item in request.session.items
                   if item.module is request.module and hasattr(item, "callspec")
                   and "lab" in item.callspec.params})
    running = {}
    for lab in labs:
        batch = tmp_path_factory.mktemp(f"{lab}-samples")
        for student in SAMPLES[lab]:
            shutil.copy(ROOT / "data" / "sample_submissions" / lab / f"{student}.ipynb", batch)
        out = tmp_path_factory.mktemp(f"{lab}-out")
        jobs = "2" if len(labs) == 1 else "1"
        running[lab] = (out, subprocess.Popen(
            [sys.executable, "-m", "autograder", "grade", lab, str(batch), "--out", str(out),
             "--seed", "browser", "--jobs", jobs, "--quiet"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs, failed = {}, {}
    for lab, (out, process) in running.items():
        output, _ = process.communicate(timeout=900)
        if process.returncode == 0:
            outs[lab] = out
        else:
            failed[lab] = f"grading {lab}'s samples failed: {output[-3000:]}"
    return {**outs, **failed}


def vocabulary_of(lab: str, student: str) -> set[str]:
    """The words of the student's notebook (its code names: x_padding_mask)."""
    notebook = json.loads((ROOT / "data" / "sample_submissions" / lab / f"{student}.ipynb")
                          .read_text())
    return set(WORD.findall(" ".join("".join(cell["source"]) for cell in notebook["cells"])))


def _out(graded: dict, lab: str) -> Path:
    if isinstance(graded[lab], str):
        pytest.fail(graded[lab])
    return graded[lab]


def _lab_param(lab: str):
    marks = [pytest.mark.slow] + ([] if lab == MAKE_TEST_LAB else [pytest.mark.browser])
    return pytest.param(lab, marks=marks, id=lab)


LABS = [_lab_param(lab) for lab in SAMPLES]


# -- the kit's pages -----------------------------------------------------------------------------
@needs_browser
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lab", LABS)
def test_feedback_pages_show_whole_in_a_browser(lab, width, graded, browser):
    out = _out(graded, lab)
    wrong = []
    for student in SAMPLES[lab]:
        shot = None
        if SCREENSHOTS and lab == "lab4" and student == "grace":
            shot = ROOT / SCREENSHOTS / f"feedback-lab4-grace-{width}.png"
        found = browser.check(out / "feedback" / f"{student}.html", width, shot)
        if (lab, student) in PICTURED:
            assert found["pictures"], f"{lab}'s {student}: {PICTURED[lab, student]} is missing"
        wrong += [f"{student}: {problem}"
                  for problem in problems(found, width, vocabulary_of(lab, student))]
    assert not wrong, f"{lab}'s feedback at {width} px:\n" + "\n".join(wrong)


@needs_browser
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lab", LABS)
def test_the_report_shows_whole_in_a_browser(lab, width, graded, browser):
    out = _out(graded, lab)
    shot = ROOT / SCREENSHOTS / f"report-lab4-{width}.png" if SCREENSHOTS and lab == "lab4" else None
    found = browser.check(out / "report.html", width, shot)
    assert found["pictures"], "report.html draws its histogram and pass rates (svg)"
    vocabulary = set().union(*(vocabulary_of(lab, student) for student in SAMPLES[lab]))
    wrong = problems(found, width, vocabulary)
    assert not wrong, f"{lab}'s report.html at {width} px:\n" + "\n".join(wrong)


# -- the checker cannot pass vacuously -----------------------------------------------------------
PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg"
         "YPj/HwADAgH/eL9GtQAAAABJRU5ErkJggg==")

CLEAN_PAGE = f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>clean</title></head>
<body><p>x_padding_mask must broadcast (B, 1, T). Arguments received … (cut)</p>
<img src="{PIXEL}" width="20" height="20" alt="a pixel">
<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20"/></svg>
<details><summary>details</summary><svg width="10" height="10"><rect width="10" height="10"/></svg></details>
<table><tr><th>Exercise</th><th>Points</th></tr><tr><td>causal_mask</td><td>1</td></tr></table>
</body></html>"""

BROKEN_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>broken</title>
<link rel="stylesheet" href="http://example.com/style.css"></head>
<body><p>\x1b[1mInvalidArgumentError\x1b[0m and ?[1mIncompatible shapes?[0m</p>
<p>x_padding_mask is an argument; Arguments received: x_paddin… (cut)</p>
<img src="missing.png" width="20" height="20" alt="a missing picture">
<img src="http://example.com/heatmap.png" alt="an external picture">
<pre>""" + "DecoderLayer" * 60 + """</pre>
<table style="width: 12em"><tr><td style="overflow-wrap: anywhere">causal_mask</td>
<td>the boolean mask (T, T), True on and below the diagonal</td></tr></table>
</body></html>"""


@needs_browser
def test_the_checker_passes_a_clean_page(browser, tmp_path):
    page = tmp_path / "clean.html"
    page.write_text(CLEAN_PAGE)
    for width in WIDTHS:
        found = browser.check(page, width)
        assert len(found["pictures"]) == 3, found["pictures"]
        assert problems(found, width) == [], (width, problems(found, width))


@needs_browser
def test_the_checker_fails_a_page_with_each_problem(browser, tmp_path):
    page = tmp_path / "broken.html"
    page.write_text(BROKEN_PAGE)
    found = browser.check(page, 390)
    wrong = "\n".join(problems(found, 390) + problems(browser.check(page, 1280), 1280))
    assert "\\x1b[1mInvalidArgumentError" in wrong and "?[1mIncompatible" in wrong, wrong
    assert "picture: img missing.png: did not load" in wrong, wrong
    assert "picture: img http://example.com/heatmap.png: did not load" in wrong, wrong
    assert "external request: http://example.com/style.css" in wrong, wrong
    assert "external request: http://example.com/heatmap.png" in wrong, wrong
    assert f"external request: {(tmp_path / 'missing.png').as_uri()}" in wrong, wrong
    assert "cut inside a word: " in wrong and "x_paddin… (cut)" in wrong, wrong
    assert 'one word broken across lines: td "causal_mask"' in wrong, wrong
    assert "the page scrolls sideways" in wrong and "runs off the page: pre" in wrong, wrong
    # without a viewport meta tag a phone lays the page out 980 px wide
    page.write_text(CLEAN_PAGE.replace('<meta name="viewport"', '<meta name="nothing"'))
    assert "no viewport meta tag (width=device-width): a phone lays the page out 980 px wide" in "\n".join(problems(browser.check(page, 390), 390))


def test_cuts_are_told_apart_from_whole_words():
    vocabulary = {"x_padding_mask"}
    assert cut_inside_words("received: x_paddin… (cut)", vocabulary) == \
        ["received: x_paddin… (cut)"]
    assert cut_inside_words("received: x_padding_mask… (cut)", vocabulary) == []
    assert cut_inside_words("the queries come from… (cut)", vocabulary) == []
    assert cut_inside_words("a word we do not know… (cut)", vocabulary) == []
