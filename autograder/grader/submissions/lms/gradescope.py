"""Gradescope's ``submission_metadata.yml`` read, for the LMS naming rules
(autograder.grader.submissions.lms, rule 5): which student, or group of
students, each ``submission_<n>`` folder is, and when it was submitted;
read with PyYAML's safe loader, every id as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

_GRADESCOPE_KEY = re.compile(r"^:?(submission_\d+)$")


# The ignore: a base class chosen at import (libyaml's loader when installed).
class _MetadataLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's when there is one), reading ids as written.

    Every scalar but null is text, as written: an unquoted ``:sid: 0012345``
    stays ``0012345`` (the safe loader's YAML 1.1 would read the octal 5349),
    and a malformed date in ``:created_at:`` is no error. A tag the safe
    loader does not know (Ruby's ``!ruby/object:...`` in an export) is read
    as the plain mapping, list or text it tags. Nothing else changes: only
    str, list, dict and None are ever built.
    """


_MetadataLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag == "tag:yaml.org,2002:null"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_untagged(loader, suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)


_MetadataLoader.add_multi_constructor("!", _construct_untagged)


def parse_gradescope_metadata(text: str) -> dict[str, str]:
    """Map ``submission_<n>`` to a student id from Gradescope's metadata.

    ``text`` is ``submission_metadata.yml``, read with PyYAML's safe loader
    (``_MetadataLoader``). The id of a submission is the first submitter's
    ``:sid:`` that is not empty, else the local part of the first ``:email:``
    that is not; submissions without either are left out::

        submission_98765:            # or :submission_98765: (a Ruby symbol)
          :submitters:
          - :name: Jane Doe
            :sid: '123456'
            :email: jane@example.com

    gives ``{"submission_98765": "123456"}``.

    Raises:
        ValueError: ``text`` is not YAML, or not a mapping of submissions;
            the message says where and what was expected.
    """
    return {key: found.student_id for key, found in parse_gradescope_submissions(text).items()}


@dataclass(frozen=True)
class GradescopeSubmission:
    """What Gradescope's metadata says of one ``submission_<n>``: its first
    submitter's id (sid, else the email's local part), sid, email and name,
    and ``:created_at:`` as written ("" when missing)."""

    student_id: str
    sid: str = ""
    email: str = ""
    name: str = ""
    created_at: str = ""
    #: Every submitter after the first, as (name, sid, email): a group
    #: submission's partners, who get its score as Gradescope gives it them.
    others: tuple[tuple[str, str, str], ...] = ()


def parse_gradescope_submissions(text: str) -> dict[str, GradescopeSubmission]:
    """``parse_gradescope_metadata`` with all the kit reads of each submission.

    Raises:
        ValueError: as ``parse_gradescope_metadata``.
    """
    try:
        document = yaml.load(text, Loader=_MetadataLoader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        raise ValueError(f"not valid YAML ({' '.join(str(error).split())[:300]})") from None
    except RecursionError:
        raise ValueError("not valid YAML (nested too deeply)") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ValueError(f"expected a mapping of submission_<n> to submissions, "
                         f"found a {type(document).__name__}")
    return _gradescope_submissions(document)


def _gradescope_submissions(document: dict) -> dict[str, GradescopeSubmission]:
    found = {}
    for key, block in document.items():
        match = _GRADESCOPE_KEY.match(str(key))
        if not match:
            continue
        submitters = _field(block, "submitters")
        submitters = [s for s in submitters if isinstance(s, dict)] \
            if isinstance(submitters, list) else []
        people = [(_text(_field(s, "name")), _text(_field(s, "sid")), _text(_field(s, "email")))
                  for s in submitters]
        people = [p for p in people if p[1] or p[2]]
        if people:
            # The id is the first sid given, else the first email: that
            # submitter's row holds the submission; the others share it.
            first = next((p for p in people if p[1]), people[0])
            name, sid, email = first
            found[match.group(1)] = GradescopeSubmission(
                sid or email.split("@")[0], sid, email, name,
                _text(_field(block, "created_at")), tuple(p for p in people if p != first))
    return found


def _text(value) -> str:
    return "" if value is None or isinstance(value, (dict, list)) else str(value).strip()


def _first(submitters: list, name: str) -> str:
    """The first submitter's ``name`` field that is not empty ("" when none is)."""
    return next((_text(_field(s, name)) for s in submitters if _text(_field(s, name))), "")


def _field(mapping, name: str):
    """``mapping[":name"]`` (Gradescope writes Ruby symbols), else ``mapping["name"]``."""
    if not isinstance(mapping, dict):
        return None
    return mapping.get(f":{name}", mapping.get(name))

