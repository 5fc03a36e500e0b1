"""Every text a published file holds, decoded: what the leak scanner reads.

A solution leaks as well in a file with one latin-1 byte, a `.gz`, a zip, a
notebook's attachment or HTML output, or an ANSI-coloured traceback as in a
plain `.py`. :func:`decode` turns the bytes of one file into the texts it
holds (:class:`Piece`), each with where in the file it was found, and says
which parts it cannot read (:class:`Unreadable`), which publish refuses
unless course.toml's ``[public] allow_binary`` lists the file:

- text in any encoding: UTF-8, UTF-16/32 (with a BOM, or UTF-16 told by its
  NUL bytes), else cp1252/latin-1 when the result reads as text (few control
  characters); ANSI escape sequences removed;
- archives and compressed files, by their signature (not their name): gzip,
  bz2, xz, zip (encrypted members are unreadable), tar; recursively, at most
  ``MAX_DEPTH`` deep, ``MAX_MEMBER_BYTES`` a member and ``MAX_FILE_BYTES``
  decompressed a file, against zip bombs;
- notebooks (any JSON with ``cells``): each cell's source, attachments
  (base64) and outputs: stream text, tracebacks, text/plain, text/html
  (tags stripped, entities unescaped), JSON, images (base64), metadata;
  other JSON: its keys and strings;
- in any text, HTML markup (tags stripped, entities unescaped: syntax
  highlighting), IPython's traceback line numbers (``----> 3``), runs of
  base64, hex and base85 that decode to text or to an archive, and rot13 and
  reversed text (autograder.publish.encoded);
- data formats whose content cannot hold code, checked as such: PNG (its
  text chunks are read), HDF5 (Keras weights: numeric datasets; names,
  attributes and string datasets are read; needs h5py), NumPy ``.npy``
  (numeric arrays; no pickles). Byte arrays (int8/uint8) are read as text
  too, and every binary format's printable runs of bytes are read as well.

Numbers in float arrays are not read as text: weights cannot be told from
code hidden in their bits, which nobody publishes by mistake.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import codecs
import html
import io
import json
import lzma
import re
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from autograder.publish.encoded import binary_runs, rewritten

#: Archives inside archives, base64 inside notebooks, JSON inside strings...
MAX_DEPTH = 8
#: The most one decompressed member may hold (more: unreadable, a zip bomb?).
MAX_MEMBER_BYTES = 64 << 20
#: The most one published file may decompress to, all members together.
MAX_FILE_BYTES = 256 << 20
#: The most members one archive may have.
MAX_MEMBERS = 20_000
#: The least length of a run of printable bytes read from binary data.
MIN_PRINTABLE = 16


@dataclass(frozen=True)
class Piece:
    """A text found in a file; ``where`` says where inside it ("" the file itself)."""

    where: str
    text: str


@dataclass(frozen=True)
class Unreadable:
    """A part of a file that cannot be read, and why."""

    where: str
    reason: str


class _TooLarge(Exception):
    pass


_TOO_LARGE = (f"decompresses to more than the scanner reads ({MAX_MEMBER_BYTES >> 20} MiB a "
              f"member, {MAX_FILE_BYTES >> 20} MiB a file, {MAX_MEMBERS} members): a zip bomb?")


class _Budget:
    """Decompressed bytes left for one file."""

    def __init__(self) -> None:
        self.left = MAX_FILE_BYTES

    def cap(self) -> int:
        return min(MAX_MEMBER_BYTES, self.left)

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise _TooLarge


def decode(data: bytes) -> Iterator[Piece | Unreadable]:
    """The texts the file ``data`` holds, and the parts that cannot be read."""
    try:
        yield from _bytes(data, "", 0, _Budget(), strict=True)
    except _TooLarge:
        yield Unreadable("", _TOO_LARGE)


def decode_text(text: str) -> Iterator[Piece | Unreadable]:
    """The texts ``text`` holds (itself, a notebook's cells, HTML without tags...)."""
    try:
        yield from _text(text, "", 0, _Budget())
    except _TooLarge:
        yield Unreadable("", _TOO_LARGE)


def _inside(where: str, part: str) -> str:
    return f"{where} > {part}" if where else part


# --- bytes -------------------------------------------------------------------------------

_PNG = b"\x89PNG\r\n\x1a\n"
_HDF5 = b"\x89HDF\r\n\x1a\n"
_NPY = b"\x93NUMPY"
_XZ = b"\xfd7zXZ\x00"
_ZIP = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_PRINTABLE = re.compile(rb"[\t\n\r\x20-\x7e]{%d,}" % MIN_PRINTABLE)


def _kind(data: bytes) -> str | None:
    if data[:2] == b"\x1f\x8b":
        return "gzip"
    if data[:3] == b"BZh" and data[4:10] == b"1AY&SY":
        return "bz2"
    if data[:6] == _XZ:
        return "xz"
    if data[:4] in _ZIP:
        return "zip"
    if data[257:262] == b"ustar":
        return "tar"
    if data[:8] == _PNG:
        return "PNG"
    if data[:8] == _HDF5:
        return "HDF5"
    if data[:6] == _NPY:
        return "npy"
    return None


def _bytes(data: bytes, where: str, depth: int, budget: _Budget,
           strict: bool) -> Iterator[Piece | Unreadable]:
    """``strict``: what cannot be read is Unreadable (else ignored: a run of
    base64 that decodes to noise is a hash, not a hidden file)."""
    if not data:
        return
    if depth > MAX_DEPTH:
        if strict:
            yield Unreadable(where, f"nested more than {MAX_DEPTH} deep (archives in archives, "
                                    "encodings in encodings)")
        return
    kind = _kind(data)
    if kind is None:
        text = as_text(data)
        if text is not None:
            yield from _text(text, where, depth, budget)
        elif strict:
            yield Unreadable(where, _unknown(data))
        return
    try:
        if kind in ("gzip", "bz2", "xz"):
            inner = _decompress(kind, data, budget)
            yield from _bytes(inner, _inside(where, f"{kind}-decompressed"), depth + 1, budget,
                              strict)
        elif kind == "zip":
            yield from _zip(data, where, depth, budget, strict)
        elif kind == "tar":
            yield from _tar(data, where, depth, budget, strict)
        elif kind == "PNG":
            yield from _png(data, where, depth, budget, strict)
        elif kind == "HDF5":
            yield from _hdf5(data, where, depth, budget, strict)
        elif kind == "npy":
            yield from _npy(data, where, depth, budget, strict)
    except _TooLarge:
        if strict:
            yield Unreadable(where, _TOO_LARGE)
        return
    except (OSError, EOFError, ValueError, KeyError, RuntimeError, NotImplementedError,
            struct.error, zlib.error, lzma.LZMAError, zipfile.BadZipFile,
            tarfile.TarError) as error:
        if strict:
            yield Unreadable(where, f"a damaged or unsupported {kind} file ({error})")
        return
    if kind not in ("tar",):
        # Whatever a container holds outside what its format reads (a gzip
        # header's name, a zip's slack, a PNG's private chunk) is read too.
        runs = b"\n".join(_PRINTABLE.findall(data))
        if runs:
            yield from _text(runs.decode("ascii"), _inside(where, f"printable bytes of the {kind} "
                                                                 "data"), depth + 1, budget)


def _unknown(data: bytes) -> str:
    signatures = {b"\xff\xd8\xff": "a JPEG image", b"GIF8": "a GIF image", b"%PDF": "a PDF",
                  b"\x7fELF": "an executable", b"7z\xbc\xaf": "a 7z archive",
                  b"Rar!": "a RAR archive", b"\x28\xb5\x2f\xfd": "a zstd file",
                  b"RIFF": "a RIFF (WebP, WAV) file", b"\x80": "a pickle"}
    what = next((name for magic, name in signatures.items() if data.startswith(magic)),
                "binary data")
    return (f"{what} that the scanner cannot read: not text in any encoding it knows, nor "
            "gzip/bz2/xz, zip, tar, a notebook, PNG, HDF5 or NumPy data")


def _decompress(kind: str, data: bytes, budget: _Budget) -> bytes:
    cap = budget.cap()
    out = bytearray()
    while data:
        if kind == "gzip":
            engine = zlib.decompressobj(47)
            out += engine.decompress(data, cap + 1 - len(out))
            while engine.unconsumed_tail and len(out) <= cap:
                out += engine.decompress(engine.unconsumed_tail, cap + 1 - len(out))
            if len(out) > cap:
                raise _TooLarge
            if not engine.eof:
                raise EOFError("the compressed stream is cut short")
            data = engine.unused_data
        else:
            stream: bz2.BZ2Decompressor | lzma.LZMADecompressor = (
                bz2.BZ2Decompressor() if kind == "bz2" else lzma.LZMADecompressor())
            out += stream.decompress(data, cap + 1 - len(out))
            while not stream.eof and not stream.needs_input and len(out) <= cap:
                out += stream.decompress(b"", cap + 1 - len(out))
            if len(out) > cap:
                raise _TooLarge
            if not stream.eof:
                raise EOFError("the compressed stream is cut short")
            data = stream.unused_data
        data = data.lstrip(b"\0")  # padding between concatenated streams
    budget.spend(len(out))
    return bytes(out)


def _zip(data: bytes, where: str, depth: int, budget: _Budget,
         strict: bool) -> Iterator[Piece | Unreadable]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise _TooLarge
        for info in members:
            if info.is_dir():
                continue
            inner = _inside(where, info.filename)
            if info.flag_bits & 0x1:
                if strict:
                    yield Unreadable(inner, "an encrypted zip member: the scanner cannot read it")
                continue
            try:
                with archive.open(info) as handle:
                    content = handle.read(budget.cap() + 1)
            except (NotImplementedError, zipfile.BadZipFile, zlib.error, lzma.LZMAError,
                    OSError, EOFError, RuntimeError, ValueError) as error:
                if strict:
                    yield Unreadable(inner, f"a zip member that cannot be read ({error})")
                continue
            if len(content) > budget.cap():
                raise _TooLarge
            budget.spend(len(content))
            yield from _bytes(content, inner, depth + 1, budget, strict)


def _tar(data: bytes, where: str, depth: int, budget: _Budget,
         strict: bool) -> Iterator[Piece | Unreadable]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        for count, member in enumerate(archive):
            if count >= MAX_MEMBERS:
                raise _TooLarge
            if not member.isfile():
                continue
            if member.size > budget.cap():
                raise _TooLarge
            handle = archive.extractfile(member)
            content = handle.read() if handle else b""
            budget.spend(len(content))
            yield from _bytes(content, _inside(where, member.name), depth + 1, budget, strict)


#: PNG chunks that hold pixels, colours or timing, nothing else.
_PNG_DATA = {b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"cHRM", b"gAMA", b"iCCP", b"sBIT",
             b"sRGB", b"bKGD", b"hIST", b"pHYs", b"sPLT", b"tIME", b"eXIf", b"acTL", b"fcTL",
             b"fdAT", b"cICP", b"mDCV", b"cLLI"}


def _png(data: bytes, where: str, depth: int, budget: _Budget,
         strict: bool) -> Iterator[Piece | Unreadable]:
    position = len(_PNG)
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        name = kind.decode("latin-1")
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            keyword, _, rest = body.partition(b"\0")
            label = _inside(where, f"PNG {name} {keyword.decode('latin-1')!r}")
            if kind == b"tEXt":
                text = rest.decode("latin-1")
            elif kind == b"zTXt":
                text = _decompress("gzip", rest[1:], budget).decode("latin-1")
            else:
                compressed = rest[:1] == b"\x01"
                _, _, rest = rest[2:].partition(b"\0")  # language
                _, _, rest = rest.partition(b"\0")  # translated keyword
                raw = _decompress("gzip", rest, budget) if compressed else rest
                text = raw.decode("utf-8", "replace")
            yield from _text(text, label, depth + 1, budget)
        elif kind not in _PNG_DATA:
            yield from _bytes(body, _inside(where, f"PNG chunk {name}"), depth + 1, budget,
                              strict=False)
        if kind == b"IEND":
            break
    trailing = data[position:]
    if trailing.strip(b"\0"):
        yield from _bytes(trailing, _inside(where, "data after the PNG's end"), depth + 1,
                          budget, strict)


def _array_texts(array, name: str, where: str, depth: int, budget: _Budget,
                 strict: bool) -> Iterator[Piece | Unreadable]:
    """A NumPy array read as data: numbers are data; bytes, strings and byte
    arrays are read as text; objects and anything else are unreadable."""
    import numpy as np

    dtype = array.dtype
    label = _inside(where, name)
    if dtype.fields:
        for field in dtype.names:
            yield from _array_texts(array[field], f"{name}[{field!r}]", where, depth, budget,
                                    strict)
        return
    if dtype.kind in "biufcmM":
        if dtype.itemsize == 1 and dtype.kind in "iu":
            yield from _bytes(np.ascontiguousarray(array).tobytes(), label, depth + 1, budget,
                              strict=False)
        return
    if dtype.kind in "SUO":
        values = []
        for value in np.asarray(array, dtype=object).ravel():
            if isinstance(value, bytes):
                values.append(as_text(value) or value.decode("latin-1"))
            elif isinstance(value, str):
                values.append(value)
            elif strict:
                yield Unreadable(label, f"an array of Python objects ({type(value).__name__})")
                return
        yield from _text("\n".join(values), label, depth + 1, budget)
        return
    if strict:
        yield Unreadable(label, f"an array of {dtype} the scanner cannot read")


def _npy(data: bytes, where: str, depth: int, budget: _Budget,
         strict: bool) -> Iterator[Piece | Unreadable]:
    import numpy as np

    try:
        array = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    except ValueError as error:
        if strict:
            yield Unreadable(where, f"a NumPy array the scanner will not load ({error}): "
                                    "pickled objects can hold anything")
        return
    yield from _array_texts(array, "array", where, depth, budget, strict)


def _hdf5(data: bytes, where: str, depth: int, budget: _Budget,
          strict: bool) -> Iterator[Piece | Unreadable]:
    try:
        import h5py
    except ImportError:
        if strict:
            yield Unreadable(where, "HDF5 data, which the scanner reads with h5py: install h5py "
                                    "(Keras installs it)")
        return
    found: list[Piece | Unreadable] = []
    names: list[str] = []

    def attributes(obj, label):
        for key, value in obj.attrs.items():
            names.append(str(key))
            if isinstance(value, str):
                names.append(value)
            else:
                found.extend(_value_texts(value, f"{label} attribute {key!r}", where, depth,
                                          budget, strict))

    def visit(name, obj):
        names.append(name)
        attributes(obj, name)
        if isinstance(obj, h5py.Dataset):
            if obj.is_virtual or obj.external:
                if strict:
                    found.append(Unreadable(_inside(where, name),
                                            "an HDF5 dataset stored in other files"))
                return
            if obj.dtype.kind in "biufcmM" and not (obj.dtype.itemsize == 1
                                                    and obj.dtype.kind in "iu"):
                return  # numbers: data
            budget.spend(obj.size * obj.dtype.itemsize)
            found.extend(_array_texts(obj[()], name, where, depth, budget, strict))

    with h5py.File(io.BytesIO(data), "r") as handle:
        attributes(handle, "/")
        handle.visititems(visit)
    yield from found
    yield from _text("\n".join(names), _inside(where, "HDF5 names and attributes"), depth + 1,
                     budget)


def _value_texts(value, label: str, where: str, depth: int, budget: _Budget,
                 strict: bool) -> list[Piece | Unreadable]:
    import numpy as np

    if isinstance(value, bytes):
        return list(_bytes(value, _inside(where, label), depth + 1, budget, strict=False))
    if isinstance(value, str):
        return list(_text(value, _inside(where, label), depth + 1, budget))
    return list(_array_texts(np.asarray(value), label, where, depth, budget, strict))


# --- text --------------------------------------------------------------------------------

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))
#: Control characters that text does not hold (tab, newlines, form feed and ESC it may).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f\x80-\x9f]")


def _reads_as_text(text: str) -> bool:
    controls = len(_CONTROL.findall(text))
    return controls <= max(1, len(text) // 200)


def as_text(data: bytes) -> str | None:
    """``data`` as text in the encoding it reads in, or None (binary data)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                break
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        if _reads_as_text(text):
            return text
        if b"\0" not in data:
            return None
    if b"\0" in data:
        # UTF-16 without a BOM: every other byte NUL.
        even, odd = data[0::2].count(0), data[1::2].count(0)
        wide = "utf-16-le" if odd > 3 * even else "utf-16-be" if even > 3 * odd else None
        if wide and len(data) % 2 == 0:
            try:
                text = data.decode(wide)
            except UnicodeDecodeError:
                return None
            return text if _reads_as_text(text) else None
        return None
    for encoding in ("cp1252", "latin-1"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        return text if _reads_as_text(text) else None
    return None


#: ANSI escape sequences: colours (CSI ... m), cursor moves, titles (OSC ... BEL).
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_TAG = re.compile(r"<[A-Za-z!/?][^<>]*>")
_BREAK = re.compile(r"<(?:br|/p|/div|/tr|/li|/pre|/h\d)\b[^<>]*>", re.I)
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-f]+|[a-z][a-z0-9]*);", re.I)
_SCRIPT = re.compile(r"<(style)\b[^<>]*>.*?</\1\s*>", re.I | re.S)
#: IPython's traceback context: "      1 def f():", "----> 2     return x".
_TRACEBACK_LINE = re.compile(r"^[ \t]*(?:-*>[ \t]*)?\d+(?: |$)", re.M)


def strip_html(text: str) -> str:
    """The text an HTML fragment shows: tags removed, entities unescaped."""
    text = _SCRIPT.sub("", text)
    text = _BREAK.sub("\n", text)
    return html.unescape(_TAG.sub("", text))


#: HTML is shown twice at most (escaped in HTML); base85 and noise look like HTML.
_TWICE_SHOWN = "HTML as shown twice"


def _text(text: str, where: str, depth: int, budget: _Budget,
          done: str = "") -> Iterator[Piece | Unreadable]:
    """``done``: how ``text`` was decoded (rot13, reversed, HTML shown), not again."""
    if depth > MAX_DEPTH:
        return
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    stripped = text.lstrip()
    if stripped[:1] in ("{", "[") and depth < MAX_DEPTH:
        try:
            document = json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(document, dict) and isinstance(document.get("cells"), list):
                yield from _notebook(document, where, depth + 1, budget)
            else:
                yield from _text(_json_strings(document), where, depth + 1, budget)
            return
    yield Piece(where, text)
    for label, raw in binary_runs(text):
        yield from _payload(raw, _inside(where, label), depth + 1, budget)
    for label, other in rewritten(text, done):
        yield from _text(other, _inside(where, label), depth + 1, budget, done=label)
    if done != _TWICE_SHOWN and (_TAG.search(text) or _ENTITY.search(text)):
        shown = strip_html(text)
        if shown != text:
            yield from _text(shown, _inside(where, "HTML as shown"), depth + 1, budget,
                             done=_TWICE_SHOWN if done == "HTML as shown" else "HTML as shown")
    if len(_TRACEBACK_LINE.findall(text)) >= 2:
        yield Piece(_inside(where, "without line numbers"), _TRACEBACK_LINE.sub("", text))


def _payload(raw: bytes, where: str, depth: int, budget: _Budget) -> Iterator[Piece | Unreadable]:
    """The bytes of an encoded run in a text: read as a file is (text, an
    archive...), else their printable runs (the run began or ended inside other
    text, whose characters decoded to a few stray bytes around the code);
    noise (a hash, a name) holds none."""
    if _kind(raw) is not None or as_text(raw) is not None:
        yield from _bytes(raw, where, depth, budget, strict=False)
        return
    runs = b"\n".join(_PRINTABLE.findall(raw))
    if runs:
        yield from _text(runs.decode("ascii"), where, depth, budget)


def _join(value) -> str:
    """nbformat stores a text as a string or a list of lines."""
    if isinstance(value, list):
        return "".join(item if isinstance(item, str) else json.dumps(item) for item in value)
    return value if isinstance(value, str) else json.dumps(value)


def _strings(node) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list):
        # nbformat may store a text as a list of lines: keep them one text.
        if node and all(isinstance(item, str) for item in node):
            yield "".join(node)
        else:
            for item in node:
                yield from _strings(item)


def _json_strings(node) -> str:
    return "\n".join(_strings(node))


#: Output MIME types that hold text (others hold base64: images, PDFs).
_TEXT_MIME = re.compile(r"^(text/|application/(javascript|json|xml|x-latex|.*\+json|.*\+xml)$"
                        r"|image/svg\+xml$)")


def _notebook(document: dict, where: str, depth: int,
              budget: _Budget) -> Iterator[Piece | Unreadable]:
    for number, cell in enumerate(document["cells"], 1):
        if not isinstance(cell, dict):
            yield from _text(_json_strings(cell), _inside(where, f"cell {number}"), depth, budget)
            continue
        kind = cell.get("cell_type", "cell")
        label = _inside(where, f"cell {number}")
        yield from _text(_join(cell.get("source", "")), f"{label} ({kind})", depth, budget)
        attachments = cell.get("attachments") or {}
        for name, bundle in (attachments.items() if isinstance(attachments, dict) else []):
            for mime, value in (bundle.items() if isinstance(bundle, dict) else [("", bundle)]):
                yield from _mime(mime, value, f"{label} attachment {name!r} ({mime})", depth,
                                 budget, attachment=True)
        for index, output in enumerate(cell.get("outputs") or [], 1):
            if not isinstance(output, dict):
                continue
            out = f"{label} output {index}"
            if "text" in output:
                yield from _text(_join(output["text"]), f"{out} ({output.get('name', 'text')})",
                                 depth, budget)
            if "traceback" in output:
                lines = [_join(line) for line in output.get("traceback") or []]
                lines += [_join(output.get("ename", "")), _join(output.get("evalue", ""))]
                yield from _text("\n".join(lines), f"{out} (traceback)", depth, budget)
            data = output.get("data") or {}
            for mime, value in (data.items() if isinstance(data, dict) else []):
                yield from _mime(mime, value, f"{out} ({mime})", depth, budget)
            rest = {key: value for key, value in output.items()
                    if key not in ("text", "traceback", "ename", "evalue", "data", "name",
                                   "output_type", "execution_count")}
            if rest:
                yield from _text(_json_strings(rest), f"{out} (metadata)", depth, budget)
        rest = {key: value for key, value in cell.items()
                if key not in ("source", "attachments", "outputs", "cell_type",
                               "execution_count", "id")}
        if rest:
            yield from _text(_json_strings(rest), f"{label} (metadata)", depth, budget)
    rest = {key: value for key, value in document.items() if key != "cells"}
    if rest:
        yield from _text(_json_strings(rest), _inside(where, "notebook metadata"), depth, budget)


def _mime(mime: str, value, where: str, depth: int, budget: _Budget,
          attachment: bool = False) -> Iterator[Piece | Unreadable]:
    """An output's or an attachment's data: text for text types, else base64
    (an attachment is base64 whatever its type)."""
    if not isinstance(value, (str, list)) or (isinstance(value, list) and not all(
            isinstance(item, str) for item in value)):
        yield from _text(_json_strings(value), where, depth, budget)
        return
    text = _join(value)
    if _TEXT_MIME.match(mime) and not attachment:
        yield from _text(text, where, depth, budget)  # HTML: also as shown, without tags
        return
    try:
        raw = base64.b64decode(re.sub(r"\s", "", text), validate=True)
    except (binascii.Error, ValueError):
        yield from _text(text, where, depth, budget)
        return
    budget.spend(len(raw))
    yield from _bytes(raw, where, depth + 1, budget, strict=True)
