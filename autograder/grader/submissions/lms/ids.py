"""Student ids made from the download's names, for the LMS naming rules
(autograder.grader.submissions.lms, rule 7): sanitized to
``[A-Za-z0-9_.-]`` and made unique, an earlier run's ids kept, with a note
on every clash.
"""

from __future__ import annotations

import re
import unicodedata

_MAX_ID_LENGTH = 100


def sanitize_id(raw: str) -> str:
    """``raw`` reduced to ``[A-Za-z0-9_.-]`` ("" when nothing is left).

    >>> sanitize_id("José María")
    'Jose_Maria'
    """
    text = unicodedata.normalize("NFKD", raw).strip()
    text = re.sub(r"\s+", "_", text)
    text = re.sub(r"[^A-Za-z0-9_.-]", "", text)
    return text.strip("._-")[:_MAX_ID_LENGTH].strip("._-")


def unique_ids(wanted: list[tuple[str, str, str]]) -> list[str]:
    """Sanitized, unique ids for ``(raw_id, fallback, source_name)``, in that order.

    ``assign_ids`` without remembered ids, giving the ids only.
    """
    return assign_ids(wanted)[0]


def assign_ids(wanted: list[tuple[str, str, str]], keys: list[str] | None = None,
               remembered: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Sanitized, unique ids for ``(raw_id, fallback, source_name)``, and notes on clashes.

    The id is ``raw_id`` sanitized, else ``fallback`` sanitized, else
    ``student``. When several come out equal, one keeps it and the others
    get ``-2``, ``-3``... (never another student's id), in this order:

    1. a name that is the id exactly (``alice.ipynb`` is ``alice`` before
       ``!alice.ipynb`` or ``alice .ipynb``, whatever the sort order), and
       had it in the run before (or is new);
    2. the id ``remembered[key]`` an earlier run gave the same entry
       (``keys[i]``: a stable text of the entry, see ``Group.id_key``), so
       that a rerun keeps every id, and the overrides and extensions
       written against it; but a name that only cleans to an id gives it
       up to a name that is that id exactly;
    3. a name that is the id exactly (a case variant: ``Alice`` beside
       ``alice``, ids that clash too);
    4. the lower-case id before other cases, then the sorted order of
       (id, source_name).

    Every clash is a note for the instructor, naming each file and the id
    it got: two files are never silently given one person's id.
    """
    keys = keys or [""] * len(wanted)
    remembered = remembered or {}
    bases = [sanitize_id(raw) or sanitize_id(fallback) or "student"
             for raw, fallback, _ in wanted]
    exact = [bool(raw) and sanitize_id(raw) == raw for raw, _, _ in wanted]
    # Ids that differ only in case clash too: one person's "Alice" and "alice"
    # would be one file on a case-insensitive disk, and look alike to a person.
    taken = {base.casefold() for base in bases}
    used: set[str] = set()
    ids = [""] * len(wanted)

    with_exact = {bases[i].casefold() for i in range(len(wanted)) if exact[i]}

    def memory(i: int) -> str | None:
        again = remembered.get(keys[i]) if keys[i] else None
        if again and again.casefold() == bases[i].casefold() and not exact[i] \
                and bases[i].casefold() in with_exact:
            return None  # a name that is exactly the id takes it back
        return again

    def rank(i: int):
        again = memory(i)
        order = (0 if exact[i] and again == bases[i] else 1 if again
                 else 2 if exact[i] else 3)
        # Among case variants, the lower-case id first (logins are).
        return (bases[i].casefold(), order, bases[i] != bases[i].lower(), wanted[i][2])

    for index in sorted(range(len(wanted)), key=rank):
        base = bases[index]
        again = memory(index)
        if again and again.casefold() not in used and (again == base or (
                again.startswith(f"{base}-") and again.casefold() not in taken)):
            student_id = again
        else:
            student_id, number = base, 2
            while student_id.casefold() in used or (
                    student_id != base and student_id.casefold() in taken):
                student_id = f"{base}-{number}"
                number += 1
        used.add(student_id.casefold())
        ids[index] = student_id
    notes = []
    clashing: dict[str, list[int]] = {}
    for index, base in enumerate(bases):
        clashing.setdefault(base.casefold(), []).append(index)
    for indices in clashing.values():
        if len(indices) < 2:
            continue
        indices.sort(key=lambda i: (ids[i] != bases[i], ids[i]))
        base = ids[indices[0]]
        named = ", ".join(f"{wanted[i][2]!r} is {ids[i]!r}"
                          + (" (its name is exactly the id)" if exact[i] else "")
                          + (f" (it was {remembered[keys[i]]!r} in an earlier run)"
                             if keys[i] in remembered and remembered[keys[i]] != ids[i] else "")
                          for i in indices)
        notes.append(f"{len(indices)} files give the id {base!r}: {named}. Check whose each "
                     f"file is; rename a file, or grade with a roster (--roster), to settle it")
    return ids, notes
