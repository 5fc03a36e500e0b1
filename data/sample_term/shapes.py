"""Downloads shaped as Canvas, Moodle and Gradescope write them (issue 31, item 9).

Fixture builders for the kit's term tests: each writes a file the way the
LMS's own code writes it, with the rule it follows cited beside the code
(repository, path, function). data/sample_term/SOURCES.md quotes the source
lines and gives the exact formats. Standard library and PyYAML only; load it
like data/sample_term/build.py (by path)::

    spec = importlib.util.spec_from_file_location("sample_term_shapes", TERM / "shapes.py")
    shapes = importlib.util.module_from_spec(spec); spec.loader.exec_module(shapes)

or, with the repository root on ``sys.path``, ``from data.sample_term import shapes``.

Builders (all times are timezone-aware ``datetime``; naive ones are refused):

- Canvas: ``canvas_zip`` ("Download Submissions"), ``canvas_submissions_json``
  (``GET /api/v1/courses/:course_id/assignments/:assignment_id/submissions``),
  ``canvas_gradebook_csv`` (Grades > Export);
- Moodle: ``moodle_zip`` ("Download all submissions"), ``moodle_worksheet``
  (offline grading worksheet);
- Gradescope: ``gradescope_zip`` ("Export Submissions" with
  ``submission_metadata.yml``), ``gradescope_roster_csv`` (a plain roster);
- ``lms_class(lms, n=33, ...)``: a whole class of one LMS, with the tricky
  cases, and the ground truth of every student.

Sources cited (the stored versions read; line numbers where the mirror had them):

- instructure/canvas-lms ``lib/content_zipper.rb`` (commit 05e9653c; before
  2021 ``app/models/content_zipper.rb``): ``zip_assignment``,
  ``add_submission``, ``add_upload_submission``, ``add_text_or_url``,
  ``get_filename``, ``get_user_name``, ``sanitize_user_name``,
  ``sanitize_file_name``, ``sanitize_attachment_filename``,
  ``add_attachment_to_zip`` (``zipfile.get_output_stream(filename)``).
- instructure/canvas-lms ``app/models/attachment.rb``:
  ``Attachment.make_unique_filename``, ``#handle_duplicates`` (files in a
  submissions folder are always renamed "-1", "-2"...).
- instructure/canvas-lms ``app/models/assignment.rb``: ``#representatives``,
  ``#groups_and_ungrouped`` (group assignments: one entry per group, named
  by the group).
- instructure/canvas-lms ``app/models/submission.rb``: ``module Tardiness``
  (``late?``, ``seconds_late``, ``missing?``).
- instructure/canvas-lms ``config/initializers/rubyzip.rb``
  (``Zip.unicode_names = true``, ``Zip.write_zip64_support = true``).
- instructure/canvas-lms ``lib/api/v1/submission.rb``:
  ``SUBMISSION_JSON_FIELDS``, ``SUBMISSION_JSON_METHODS``,
  ``submission_attempt_json``; the Submissions API page of the Canvas REST
  API docs (developerdocs.instructure.com, "A Submission object looks like");
  ``config/initializers/json.rb`` (``time_precision = 0``) and the
  ``JsonTimeInUTC`` initializer (times as JSON in UTC: "2012-01-01T01:00:00Z").
- instructure/canvas-lms ``lib/gradebook_exporter.rb`` (``csv_data``,
  ``buffer_column_headers``, ``format_numbers``, ``student_name``,
  ``enrollments_for_csv``) and ``lib/csv_with_i18n.rb``
  (``csv_i18n_settings``: ",", UTF-8, BOM only by a user feature flag).
- rubyzip/rubyzip v2.3.0 (the version canvas-lms ``Gemfile.d/app.rb`` pins)
  ``lib/zip/entry.rb`` lines 55-74 (``Entry#initialize``: ``@time = args[8]
  || ::Zip::DOSTime.now``) and lines 474-491 (unix perms 0644),
  ``lib/zip/file.rb`` lines 267-285 (``File#get_output_stream`` passes
  ``time = nil``), ``lib/zip/dos_time.rb`` lines 15-34 (2-second DOS time,
  local time); HEAD (v3.x) ``lib/zip/entry.rb`` lines 76-108 (``time:
  ::Zip::DOSTime.now``).
- moodle/moodle ``public/mod/assign/classes/downloader.php`` (Moodle 4.1+;
  commit b1b5f263): ``get_student_prefix``, ``load_submissionplugin_filelist``,
  ``download_zip``; ``mod/assign/tests/downloader_test.php``
  (``load_filelist_downloadasfolder_scenarios``: the expected paths);
  Moodle 3.1-4.0 ``mod/assign/locallib.php`` ``download_submissions`` and
  ``pack_files`` (folder ``..._assignsubmission_file_/``, ``zip_packer``).
- moodle/moodle ``files/classes/local/archive_writer/zip_writer.php``
  (``add_file_from_stored_file``: no time given) and
  ``lib/zipstream/src/Option/File.php`` (``defaultTo``: ``$this->time ?: new
  DateTime()``); ``lib/filestorage/stored_file.php`` ``archive_file`` and
  ``lib/filestorage/zip_archive.php`` ``add_file_from_pathname``
  (``ZipArchive::addFile``: the pooled content file's mtime), Moodle <= 4.0.
- moodle/moodle ``lib/filestorage/file_storage.php`` ``get_unused_filename``
  and ``repository/upload/lib.php`` ``process_upload`` (a later upload of a
  name the draft area has is "<name> (N).<ext>": ``moodle_unused_filename``).
- moodle/moodle ``lib/moodlelib.php`` ``clean_param`` (``PARAM_FILE``),
  ``format_time``, ``userdate``, ``date_format_string``;
  ``calendar/type/gregorian/classes/structure.php``
  ``timestamp_to_date_string`` (``fixday``, ``fixhour``);
  ``public/lang/en/langconfig.php`` (``strftimedaydatetime`` = ``'%A, %d %B
  %Y, %I:%M %p'``, ``pmcaps`` = ``'PM'``).
- moodle/moodle ``public/mod/assign/gradingtable.php`` (``__construct`` columns
  when downloading, ``$hasoverrides`` and the ``effective`` dates' SQL,
  ``col_recordid``, ``col_status``, ``col_timesubmitted``,
  ``col_timemarked``, ``col_grademax``, ``col_gradecanbechanged``,
  ``col_allowsubmissionsfromdate``, ``col_duedate``, ``col_cutoffdate``,
  ``display_grade``); ``public/mod/assign/classes/override_manager.php``
  (``parse_formdata``: an override's unchanged dates are NULL);
  ``public/mod/assign/lang/en/assign.php`` (the strings);
  ``public/mod/assign/feedback/offline/locallib.php`` ``download_grades``;
  ``lib/classes/dataformat/spout_base.php``, ``dataformat/csv/classes/writer.php``,
  ``lib/spout/src/Spout/Writer/CSV/Writer.php`` (``openWriter``: UTF-8 BOM;
  ``addRowToWriter``: PHP ``fputcsv``) and
  ``.../CSV/Manager/OptionsManager.php`` (",", '"', BOM on).
- Gradescope: a real export, pdewan/GradescopeToSakai
  ``src/main/resources/submission_metadata.yml`` (2020); ucbds-infra/otter-grader
  ``otter/metadata.py`` ``GradescopeParser`` (``metadata[folder][":submitters"]``);
  Gradescope API clients opening ``assignment_<id>_export/submission_metadata.yml``;
  Ruby Psych's ``YAMLTree#format_time`` (``"%Y-%m-%d %H:%M:%S.%9N Z"`` for UTC,
  ``"... %:z"`` otherwise). Gradescope's own code is not public: the zip's
  entry stamps and the roster file are not from a source (said where used).
"""

import csv
import datetime
import io
import json
import random
import re
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

UTC = datetime.timezone.utc
HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "sample_submissions" / "lab1"
#: The lab 1 sample notebooks a class cycles through (file name as uploaded, path).
SAMPLE_FILES = [
    ("lab1_attention.ipynb", SAMPLES / "alice.ipynb"),
    ("lab1_attention.ipynb", SAMPLES / "bob.ipynb"),
    ("lab1_attention.ipynb", SAMPLES / "carol.ipynb"),
    ("lab1_attention.ipynb", SAMPLES / "dave.ipynb"),
    ("Copy of lab1_attention.ipynb", SAMPLES / "erin" / "Copy of lab1_attention.ipynb"),
    ("lab1_attention.ipynb", SAMPLES / "frank.ipynb"),
    ("lab1_attention.ipynb", SAMPLES / "heidi.ipynb"),
]


def _zone(name):
    """A tzinfo for an IANA name (zoneinfo), or UTC for "UTC"."""
    if name in (None, "UTC", "Z"):
        return UTC
    import zoneinfo

    return zoneinfo.ZoneInfo(name)


def _aware(when, what):
    if when is None:
        return None
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got {when!r}")
    return when


def _utc(when):
    return None if when is None else _aware(when, "time").astimezone(UTC)


def _zip_writer(target, seekable=True):
    """A ZipFile writing to ``target`` (a path or a binary file object).

    ``seekable=False`` writes as a streaming writer does: every entry with
    a data descriptor (general purpose bit 3), as ZipStream-PHP does.
    """

    class _Stream(io.RawIOBase):  # write-only, no seek/tell: zipfile streams
        def __init__(self, raw):
            self.raw = raw

        def writable(self):
            return True

        def write(self, data):
            return self.raw.write(data)

        def flush(self):
            self.raw.flush()

    owned = None
    if isinstance(target, (str, Path)):
        owned = open(target, "wb")
        raw = owned
    else:
        raw = target
    fp = raw if seekable else _Stream(raw)
    archive = zipfile.ZipFile(fp, "w", compression=zipfile.ZIP_DEFLATED)
    return archive, owned


class _UnicodeNameInfo(zipfile.ZipInfo):
    """A ZipInfo whose entry always carries the UTF-8 name flag (EFS, bit 11),
    ASCII names too, as rubyzip writes every entry when ``Zip.unicode_names``
    is true (rubyzip v2.3.0 lib/zip/entry.rb lines 30-32:
    ``@gp_flags |= EFS if ::Zip.unicode_names``). zipfile sets it only for
    non-ASCII names (and resets ``flag_bits`` when writing), hence the override."""

    __slots__ = ()

    def _encodeFilenameFlags(self):  # noqa: N802 (zipfile's name)
        return self.filename.encode("utf-8"), self.flag_bits | 0x800


def _dos_tuple(local):
    """The DOS date/time fields of a wall-clock time (2-second resolution:
    rubyzip ``DOSTime#to_binary_dos_time`` stores ``sec / 2``, as zipfile does)."""
    return (local.year, local.month, local.day, local.hour, local.minute, local.second)


# =============================================================================
# Canvas
# =============================================================================


@dataclass
class CanvasStudent:
    """A Canvas user enrolled as a student.

    ``sortable_name`` is ``users.sortable_name`` ("Brown, Bob"; Canvas derives it
    from the name, an admin/SIS import or the user may set it to anything).
    ``login_id`` is the pseudonym's ``unique_id`` (the gradebook's "SIS Login
    ID"), ``sis_user_id`` its ``sis_user_id``.
    """

    user_id: int
    name: str
    sortable_name: str
    login_id: str = ""
    sis_user_id: str = ""
    section: str = "Section A"
    email: str = ""


@dataclass
class CanvasFile:
    """One attachment of the current attempt (``submission.attachment_ids``)."""

    attachment_id: int
    display_name: str
    data: bytes


@dataclass
class CanvasSubmission:
    """A student's submission row (one per assigned student, submitted or not).

    ``files`` are the *current* attempt's attachments only: the zip reads
    ``submission.attachment_ids`` (content_zipper.rb ``get_uploaded_files_from``),
    so earlier attempts are not in it. ``due_at`` is the submission's
    ``cached_due_date`` (the assignment's due date or the student's override).
    """

    student: CanvasStudent
    submission_id: int
    due_at: datetime.datetime | None
    submitted_at: datetime.datetime | None = None
    attempt: int | None = None
    files: list[CanvasFile] = field(default_factory=list)
    submission_type: str | None = None  # online_upload, online_text_entry, online_url
    body: str | None = None
    url: str | None = None
    group_name: str | None = None  # group assignments graded as a group
    anonymous_id: str | None = None  # anonymous grading: "anon_<id>" instead of the name
    excused: bool = False
    late_policy_status: str | None = None  # "late", "missing", "extended", "none"
    seconds_late_override: int | None = None

    @property
    def seconds_late(self) -> int:
        # canvas-lms app/models/submission.rb, module Tardiness, #seconds_late:
        #   return (seconds_late_override || 0) if late_policy_status == "late"
        #   return 0 if cached_due_date.nil? || time_of_submission <= cached_due_date
        #   (time_of_submission - cached_due_date).to_i
        # (time_of_submission is submitted_at, or now when nothing was submitted;
        # online_quiz subtracts 60 s, not used here.) No grace period.
        if self.late_policy_status == "late":
            return self.seconds_late_override or 0
        if self.due_at is None or self.submitted_at is None:
            return 0
        delta = (_utc(self.submitted_at) - _utc(self.due_at)).total_seconds()
        return int(delta) if delta > 0 else 0

    @property
    def late(self) -> bool:
        # Tardiness#late?: false if excused; late_policy_status == "late" if one
        # is set; else submitted_at.present? && past_due? (seconds_late > 0).
        if self.excused:
            return False
        if self.late_policy_status:
            return self.late_policy_status == "late"
        return self.submitted_at is not None and self.seconds_late > 0

    def missing(self, now: datetime.datetime) -> bool:
        # Tardiness#missing?: not excused, nothing submitted and past due
        # (seconds_late uses Time.zone.now when submitted_at is nil).
        if self.excused:
            return False
        if self.late_policy_status:
            return self.late_policy_status == "missing"
        if self.submitted_at is not None or self.due_at is None:
            return False
        return _utc(now) > _utc(self.due_at)


def _ruby_word_chars(text: str) -> str:
    """``text`` with every character not in Ruby's ``[[:word:]]`` removed.

    Onigmo's ``[[:word:]]`` is Letter | Mark | Decimal_Number |
    Connector_Punctuation (so "_" stays, accented letters stay).
    """
    keep = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LM" or cat in ("Nd", "Pc"):
            keep.append(ch)
    return "".join(keep)


def canvas_user_name(sortable_name: str) -> str:
    """The name part of a Canvas download name: "Brown, Bob" -> "brown, bob".

    canvas-lms lib/content_zipper.rb, ``get_user_name`` + ``sanitize_user_name``:
        user_name = students[submission.user_id].sortable_name
        user_name.gsub!(/_(\\d+)_/, '\\1')   # "_123_" would look like an id
        user_name.gsub!(/^(\\d+)$/, '\\1')
        user_name.downcase
    (non-word characters go later, in ``sanitize_file_name``).
    """
    name = re.sub(r"_(\d+)_", r"\1", sortable_name)
    return name.lower()


def canvas_entry_prefix(sortable_name: str | None, user_id: int, late: bool,
                        anonymous_id: str | None = None) -> str:
    """``<name>[_LATE]_<user id>`` as ``get_filename`` builds it.

    canvas-lms lib/content_zipper.rb, ``get_filename``:
        id = @assignment.anonymize_students? ? "anon_#{submission.anonymous_id}" : submission.user_id
        filename = [users_name, submission.late? ? "LATE" : nil, id].compact.join("_")
        sanitize_file_name(filename)   # filename.gsub(/[^[[:word:]]]/, "")
    ``users_name`` is nil under anonymous grading (``add_submission``). The
    current code downcases only the name (``sanitize_user_name``), so the
    marker is "LATE"; before 2021 ``sanitize_file_name`` downcased the whole
    string ("late"; app/models/content_zipper.rb).
    """
    name = None if anonymous_id is not None else canvas_user_name(sortable_name or "")
    ident = f"anon_{anonymous_id}" if anonymous_id is not None else str(user_id)
    parts = [p for p in (name, "LATE" if late else None, ident) if p is not None]
    return _ruby_word_chars("_".join(parts))


def canvas_attachment_name(display_name: str) -> str:
    """The attachment's display name as it goes in the zip.

    canvas-lms lib/content_zipper.rb, ``sanitize_attachment_filename``:
        filename.gsub(%r{[\\x00/\\\\:*?"<>|]+}, "_")
    """
    return re.sub(r'[\x00/\\:*?"<>|]+', "_", display_name)


def canvas_resubmission_name(display_name: str, existing: list[str]) -> str:
    """The display name Canvas gives an upload whose name is already in the
    student's submissions folder: "lab1_attention.ipynb" -> "lab1_attention-1.ipynb".

    canvas-lms app/models/attachment.rb, ``#handle_duplicates``: ``method =
    :rename`` when ``folder.for_submissions?``, then
    ``Attachment.make_unique_filename(new_name, existing_names, iter_count)``:
        extname = filename[/(\\.[A-Za-z][A-Za-z0-9]*)*(\\.[A-Za-z0-9]*)$/] || ""
        basename = File.basename(filename, extname)
        until block.call((new_name = "#{dir}#{basename}-#{addition}#{extname}"))
          addition += 1
    (every earlier attempt's file stays in that folder: a third upload of
    the same name is "-2").
    """
    if display_name not in existing:
        return display_name
    match = re.search(r"(\.[A-Za-z][A-Za-z0-9]*)*(\.[A-Za-z0-9]*)$", display_name)
    ext = match.group(0) if match else ""
    base = display_name[: len(display_name) - len(ext)] if ext else display_name
    addition = 1
    while f"{base}-{addition}{ext}" in existing:
        addition += 1
    return f"{base}-{addition}{ext}"


def canvas_entry_names(sub: CanvasSubmission) -> list[str]:
    """The zip entry names of one submission (none for an unsubmitted one).

    canvas-lms lib/content_zipper.rb, ``add_submission``: a group assignment's
    representative carries the group's name as its sortable name
    (app/models/assignment.rb ``#representatives``:
    ``representative.sortable_name = group_info[:sortable_name]``, the group
    name); ``add_upload_submission``:
        full_filename = "#{filename}_#{file.id}_#{sanitize_attachment_filename(file.display_name)}"
    ``add_text_or_url``: ``"#{called}_text.html"`` / ``"#{called}_link.html"``.
    Flat: no folder. Only online_upload, online_url and online_text_entry are
    zipped (``zip_assignment``: ``downloadable_submissions``).
    """
    if sub.submission_type not in ("online_upload", "online_text_entry", "online_url"):
        return []
    sortable = sub.group_name if sub.group_name is not None else sub.student.sortable_name
    prefix = canvas_entry_prefix(sortable, sub.student.user_id, sub.late, sub.anonymous_id)
    if sub.submission_type == "online_text_entry":
        return [f"{prefix}_text.html"]
    if sub.submission_type == "online_url":
        return [f"{prefix}_link.html"]
    return [f"{prefix}_{f.attachment_id}_{canvas_attachment_name(f.display_name)}"
            for f in sub.files]


def canvas_zip(path, submissions: list[CanvasSubmission], built_at: datetime.datetime, *,
               server_tz: str = "UTC", seconds_per_entry: float = 0.0) -> list[str]:
    """Write Canvas's "Download Submissions" zip; the entry names, in zip order.

    ``built_at`` is when the zip job ran (Canvas builds it in a background
    job when the instructor presses the button, and re-uses it for an hour:
    lib/api/v1/submission.rb ``submission_zip``, ``submission_zip_ttl_minutes``
    60). Every entry is added with ``zipfile.get_output_stream(filename)``
    (content_zipper.rb ``add_attachment_to_zip``, ``add_online_submission_content``)
    and no time, so rubyzip stamps it ``::Zip::DOSTime.now`` when the entry is
    created (rubyzip v2.3.0 lib/zip/file.rb 267-285 -> lib/zip/entry.rb line 70;
    v3 lib/zip/entry.rb 81/103): the job's clock, the server process's local
    zone (``DOSTime < Time``; Time.now uses TZ, not Rails' Time.zone; Canvas
    docker images run in UTC, Instructure does not document its hosts' TZ),
    2-second resolution, no zone stored. ``seconds_per_entry`` spreads the
    stamps as a slow job would (each entry is stamped when it is written,
    after the previous file was fetched from storage); 0 gives one stamp.

    Entries are flat, in the order the submissions are given (Canvas: the
    query's order, ``assignment.submissions.where(...)``), DEFLATE, Unix
    0644 (rubyzip entry.rb 474-491), the UTF-8 flag on every entry
    (config/initializers/rubyzip.rb: ``Zip.unicode_names = true``).
    """
    local = _aware(built_at, "built_at").astimezone(_zone(server_tz))
    archive, owned = _zip_writer(path)
    names = []
    try:
        index = 0
        for sub in submissions:
            entries = canvas_entry_names(sub)
            if sub.submission_type == "online_upload":
                payloads = [f.data for f in sub.files]
            elif sub.submission_type == "online_text_entry":
                # app/views/assignments/text_entry_page.html.erb rendered with the
                # body; the page's exact markup is not reproduced here.
                payloads = [("<html><body>" + (sub.body or "") + "</body></html>\n").encode()]
            elif sub.submission_type == "online_url":
                payloads = [(f'<html><head><meta http-equiv="refresh" content="0; url={sub.url}">'
                             "</head></html>\n").encode()]
            else:
                payloads = []
            for name, data in zip(entries, payloads):
                stamp = local + datetime.timedelta(seconds=index * seconds_per_entry)
                # EFS on every entry: config/initializers/rubyzip.rb Zip.unicode_names = true
                info = _UnicodeNameInfo(name, date_time=_dos_tuple(stamp))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3  # rubyzip FSTYPE_UNIX
                info.external_attr = 0o100644 << 16
                archive.writestr(info, data)
                names.append(name)
                index += 1
    finally:
        archive.close()
        if owned:
            owned.close()
    return names


def _canvas_json_time(when):
    # lib/api/v1/submission.rb serialises times through Rails' as_json; Canvas's
    # JsonTimeInUTC initializer converts to UTC and config/initializers/json.rb
    # sets ActiveSupport::JSON::Encoding.time_precision = 0: "2012-01-01T01:00:00Z"
    # (the API docs' example).
    return None if when is None else _utc(when).strftime("%Y-%m-%dT%H:%M:%SZ")


def canvas_submissions_json(path, submissions: list[CanvasSubmission], *, course_id: int,
                            assignment_id: int, now: datetime.datetime,
                            host: str = "https://canvas.example.edu") -> list[dict]:
    """The Canvas submissions API's list for one assignment (all pages joined).

    ``GET /api/v1/courses/:course_id/assignments/:assignment_id/submissions``
    (SubmissionsApiController#index) gives one object per assigned student
    (an unsubmitted one too: ``workflow_state`` "unsubmitted", ``submitted_at``
    null), each as lib/api/v1/submission.rb ``submission_attempt_json``
    writes it: the ``SUBMISSION_JSON_FIELDS`` (id user_id url score grade
    excused attempt submission_type submitted_at body assignment_id graded_at
    grade_matches_current_submission grader_id workflow_state
    late_policy_status points_deducted), the ``SUBMISSION_JSON_METHODS`` (late
    missing seconds_late entered_grade entered_score) and ``preview_url``; the
    current API docs add cached_due_date, extra_attempts, posted_at,
    redo_request (included here). Times: ISO 8601 in UTC, no fraction
    ("2026-10-06T06:00:00Z"). ``now`` is when the API was called (``missing``
    depends on it). Canvas paginates (``per_page``, ``Link`` headers); this is
    the concatenation a client makes. Written compact (Oj), one line.
    """
    records = []
    for sub in submissions:
        submitted = sub.submitted_at is not None
        records.append({
            "id": sub.submission_id,
            "user_id": sub.student.user_id,
            "url": sub.url if sub.submission_type == "online_url" else None,
            "score": None,
            "grade": None,
            "excused": sub.excused or None,
            "attempt": sub.attempt if submitted else None,
            "submission_type": sub.submission_type if submitted else None,
            "submitted_at": _canvas_json_time(sub.submitted_at),
            "body": sub.body if sub.submission_type == "online_text_entry" else None,
            "assignment_id": assignment_id,
            "graded_at": None,
            "grade_matches_current_submission": True,
            "grader_id": None,
            "workflow_state": "submitted" if submitted else "unsubmitted",
            "late_policy_status": sub.late_policy_status,
            "points_deducted": None,
            "cached_due_date": _canvas_json_time(sub.due_at),
            "extra_attempts": None,
            "posted_at": None,
            "redo_request": False,
            "late": sub.late,
            "missing": sub.missing(now),
            "seconds_late": sub.seconds_late,
            "entered_grade": None,
            "entered_score": None,
            "preview_url": (f"{host}/courses/{course_id}/assignments/{assignment_id}/submissions/"
                            f"{sub.student.user_id}?preview=1&version={sub.attempt or 0}"),
        })
    if path is not None:
        Path(path).write_text(json.dumps(records, separators=(",", ":")) + "\n", encoding="utf-8")
    return records


def _ruby_csv_line(cells, sep=","):
    """One row as Ruby's CSV writes it: nil -> empty, "" -> "\"\"", a field is
    quoted only when it holds the separator, a quote, CR or LF; "\\n" ends it."""
    out = []
    for cell in cells:
        if cell is None:
            out.append("")
            continue
        text = str(cell)
        if text == "" or any(c in text for c in (sep, '"', "\r", "\n")):
            out.append('"' + text.replace('"', '""') + '"')
        else:
            out.append(text)
    return sep.join(out) + "\n"


def _collation_key(text):
    # Canvas orders by sortable name with an ICU collation (order_by_sortable_name,
    # Canvas::ICU): case- and accent-insensitive first.
    base = unicodedata.normalize("NFKD", text)
    return ("".join(c for c in base if not unicodedata.combining(c)).casefold(), text)


def canvas_gradebook_csv(path, students: list[CanvasStudent], *, assignment_title: str,
                         assignment_id: int, points_possible: float = 10.0,
                         assignment_group: str = "Assignments",
                         test_student: CanvasStudent | None = None,
                         scores: dict | None = None) -> str:
    """Canvas's gradebook export (Grades > Export > CSV), one assignment.

    canvas-lms lib/gradebook_exporter.rb ``csv_data``: header ``Student, ID,
    SIS User ID, SIS Login ID, Section`` (``include_sis_id``: teachers may read
    SIS; ``Integration ID`` / ``Root Account`` only with account settings),
    then ``assignment.title_with_id`` ("Lab 1 (4321)"), then per assignment
    group the ``:points`` and ``:total_scores`` buffer columns ("Assignments
    Current Points" ... "Assignments Unposted Final Score") and the same six
    for the course. Row 2: ``"    Points Possible"`` (four spaces), the
    points as ``I18n.n(points, precision: 2)`` ("10.00"), "(read only)" under
    every total. Students by sortable name (``order_by_sortable_name``), the
    Student View student last (``enrollments_for_csv`` partitions
    StudentViewEnrollment to the end); the Student cell is
    ``student.sortable_name`` (``="..."`` when it starts with "=",
    ``student_name``). An ungraded score is ``format_numbers(nil)`` (empty).
    Comma, UTF-8, no BOM by default (lib/csv_with_i18n.rb). Totals of a course
    with nothing graded are written "0.00" for points and empty for scores
    (the kit does not read them).
    """
    scores = scores or {}
    read_only = "(read only)"
    totals = ["Current Points", "Final Points", "Current Score", "Unposted Current Score",
              "Final Score", "Unposted Final Score"]
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
              f"{assignment_title} ({assignment_id})"]
    header += [f"{assignment_group} {t}" for t in totals] + totals
    lines = [_ruby_csv_line(header)]
    lines.append(_ruby_csv_line(["    Points Possible", None, None, None, None,
                                 f"{points_possible:.2f}"] + [read_only] * 12))
    ordered = sorted(students, key=lambda s: _collation_key(s.sortable_name))
    if test_student is not None:
        ordered.append(test_student)
    for s in ordered:
        name = s.sortable_name
        if re.match(r"^\s*=", name):  # GradebookExporter#student_name
            name = f'="{name}"'
        score = scores.get(s.user_id)
        cell = None if score is None else f"{score:.2f}"
        blank_totals = ["0.00", "0.00", None, None, None, None]
        lines.append(_ruby_csv_line([name, s.user_id, s.sis_user_id or None, s.login_id or None,
                                     s.section, cell] + blank_totals + blank_totals))
    text = "".join(lines)
    if path is not None:
        Path(path).write_bytes(text.encode("utf-8"))
    return text


# =============================================================================
# Moodle
# =============================================================================


@dataclass
class MoodleParticipant:
    """A student of a Moodle assignment.

    ``participant_id`` is ``get_uniqueid_for_user`` (the ``assign_user_mapping``
    id): the worksheet's "Participant N" and the number in the download's
    folder names. ``status`` is ``assign_submission.status`` ("new", "draft",
    "submitted", "reopened"; None: no submission row). ``timemodified`` is
    ``assign_submission.timemodified`` (the worksheet's "Last modified
    (submission)"). ``pooled_at`` is when each file's bytes first reached the
    file pool (``$CFG->dataroot/filedir``, by content hash: normally the draft
    upload; identical bytes stored earlier by anyone keep that earlier time):
    the zip stamp of Moodle <= 4.0. ``override_due``, ``override_cutoff``,
    ``override_allow_from``: the student's user (or group) override of the
    assignment's dates (``assign_overrides``; None: the assignment's own).
    ``extension_due`` is ``assign_user_flags.extensionduedate``.
    """

    participant_id: int
    firstname: str
    lastname: str
    email: str
    username: str = ""
    idnumber: str = ""
    files: list[tuple[str, bytes]] = field(default_factory=list)
    status: str | None = None
    timemodified: datetime.datetime | None = None
    pooled_at: datetime.datetime | None = None
    grade: float | None = None
    timemarked: datetime.datetime | None = None
    extension_due: datetime.datetime | None = None
    locked: bool = False
    override_due: datetime.datetime | None = None
    override_cutoff: datetime.datetime | None = None
    override_allow_from: datetime.datetime | None = None

    @property
    def has_override(self) -> bool:
        return any(x is not None for x in (self.override_due, self.override_cutoff,
                                           self.override_allow_from))

    @property
    def fullname(self) -> str:
        # lib/moodlelib.php fullname(): the English default "{firstname} {lastname}".
        return f"{self.firstname} {self.lastname}"


def moodle_clean_filename(text: str) -> str:
    """``clean_filename`` = ``clean_param($x, PARAM_FILE)``.

    moodle/moodle lib/moodlelib.php (lib/classes/param.php since 4.4),
    ``case PARAM_FILE``:
        $param = preg_replace('~[[:cntrl:]]|[&<>"`\\|\\':\\\\\\\\/]~u', '', $param);
        if ($param === '.' || $param === '..') $param = '';
    (So "Seán O'Brien" -> "Seán OBrien": the apostrophe goes.)
    """
    text = "".join(c for c in text if unicodedata.category(c) != "Cc")
    text = re.sub(r"[&<>\"`|':\\/]", "", text)
    return "" if text in (".", "..") else text


def moodle_prefix(p: MoodleParticipant, blind: bool = False) -> str:
    """``<Full name>_<participant id>``, the start of every path of a participant.

    moodle/moodle public/mod/assign/classes/downloader.php, ``get_student_prefix``:
        $fullname = fullname($student, ...);   // or get_string('participant') with blind marking
        $prefix = str_replace('_', ' ', $fullname);
        $prefix = clean_filename($prefix . '_' . $manager->get_uniqueid_for_user($student->id));
    (Underscores in a name become spaces: "Mary_Ann Lee" -> "Mary Ann Lee_200007".)
    """
    name = "Participant" if blind else p.fullname
    return moodle_clean_filename(name.replace("_", " ") + "_" + str(p.participant_id))


def moodle_entry_name(p: MoodleParticipant, filename: str, *, folders: bool = True,
                      version: str = "4.1", plugin: str = "file", blind: bool = False) -> str:
    """The path of one submitted file in Moodle's "Download all submissions" zip.

    Moodle 4.1+ (public/mod/assign/classes/downloader.php,
    ``load_submissionplugin_filelist``; ``assign_downloadasfolders`` defaults to 1):
        folders:  clean_filename($prefix . '_' . $subtype . '_' . $type) . $file->get_filepath() . $zipfilename
                  -> "Jane Doe_200001_assignsubmission_file/lab1_attention.ipynb"
        flat:     clean_filename($prefix . '_' . $subtype . '_' . $type . '_' . $zipfilename)
                  -> "Jane Doe_200001_assignsubmission_file_lab1_attention.ipynb"
    (mod/assign/tests/downloader_test.php expects
    'STUDENT1_STUDENT1.ID_assignsubmission_file/submissionsample01.txt', and the
    same with "/" -> "_" for files.) Moodle 3.1-4.0 (mod/assign/locallib.php
    ``download_submissions``) put a "_" after the plugin type:
        clean_filename($prefix . '_' . $subtype . '_' . $type . '_') . $file->get_filepath() . $zipfilename
                  -> "Jane Doe_200001_assignsubmission_file_/lab1_attention.ipynb"
    and the same flat name. Before 3.1 flat only. The online text plugin's
    file is "<prefix>_assignsubmission_onlinetext/onlinetext.html".
    """
    prefix = moodle_prefix(p, blind)
    base = f"{prefix}_assignsubmission_{plugin}"
    if not folders:
        return moodle_clean_filename(f"{base}_{filename}")
    folder = moodle_clean_filename(base + ("_" if version.startswith(("3.", "4.0")) else ""))
    return f"{folder}/{filename}"


def moodle_unused_filename(filename: str, existing: list[str]) -> str:
    """The name Moodle gives an upload whose name is already in the draft area:
    "lab1_attention.ipynb" -> "lab1_attention (1).ipynb", then " (2)"...

    moodle/moodle lib/filestorage/file_storage.php ``get_unused_filename``
    (since 2.5; repository/upload/lib.php ``process_upload`` stores the new
    file under it and the file picker offers "Rename to ..." or "Overwrite"):
        $basename = pathinfo($filename)['filename'];
        if (preg_match('~^(.+) \\(([0-9]+)\\)$~', $basename, $matches)) $basename = $matches[1];
        ... WHERE filename LIKE "$basename (%).$extension" ORDER BY length DESC, filename DESC
        foreach: if (preg_match('~^(.+) \\(([0-9]+)\\)$~', $resultbasename, $m)) { $number = $m[2] + 1; break; }
        $newfilename = $basename . ' (' . $number . ')' . '.' . $extension;
    """
    if filename not in existing:
        return filename
    stem, dot, ext = filename.rpartition(".")
    if not dot:
        stem, ext = filename, ""
    tail = f".{ext}" if dot else ""
    numbered = re.compile(r"^(.+) \(([0-9]+)\)$")
    match = numbered.match(stem)
    base = match[1] if match else stem
    like = [n for n in existing if n.startswith(f"{base} (") and n.endswith(f"){tail}")]
    number = 1
    for name in sorted(like, key=lambda n: (len(n), n), reverse=True):
        found = numbered.match(name.rpartition(".")[0] if dot and "." in name else name)
        if found:
            number = int(found[2]) + 1
            break
    return f"{base} ({number}){tail}"


def moodle_zip(path, participants: list[MoodleParticipant], downloaded_at: datetime.datetime, *,
               server_tz: str = "UTC", folders: bool = True, version: str = "4.1",
               seconds_per_entry: float = 0.0) -> list[str]:
    """Write Moodle's "Download all submissions" zip; the entry names.

    Who is in it: every enrolled student with a submission row and files,
    drafts included (downloader.php ``get_student_submission`` takes the
    latest attempt whatever its status); nobody without files.

    Entry times:
    - Moodle 4.1+ (``version`` "4.1" or later): ``download_zip`` streams with
      ``archive_writer::get_stream_writer`` and
      ``$zipwriter->add_file_from_stored_file($pathinzip, $file)`` with no
      time (files/classes/local/archive_writer/zip_writer.php), so ZipStream
      stamps ``new DateTime()`` (lib/zipstream/src/Option/File.php
      ``defaultTo``; ZipStream 3: ``lastModificationDateTime ?? new
      DateTimeImmutable()``): the download's own time, in PHP's default zone
      (the site's server timezone, ``core_date::set_default_server_timezone``).
      Streamed: every entry has a data descriptor (general purpose bit 3).
    - Moodle 3.1-4.0 (``version`` "3.x"/"4.0"): ``pack_files`` ->
      ``zip_packer::archive_to_pathname`` -> ``stored_file::archive_file`` ->
      ``zip_archive::add_file_from_pathname`` -> ``ZipArchive::addFile`` of the
      pooled content file, so the stamp is that file's mtime: when the bytes
      first reached the file pool (``pooled_at``, or ``pooled_at[filename]``
      when it is a dict: a resubmission's files reached it at different
      times), in the server's zone.
    Neither is the submission time: the worksheet's "Last modified
    (submission)" is.
    """
    zone = _zone(server_tz)
    modern = not version.startswith(("3.", "4.0"))
    local = _aware(downloaded_at, "downloaded_at").astimezone(zone)
    archive, owned = _zip_writer(path, seekable=not modern)
    names = []
    try:
        index = 0
        for p in participants:
            if p.status is None or p.status == "new":
                continue
            for filename, data in p.files:
                name = moodle_entry_name(p, filename, folders=folders, version=version)
                if modern:
                    stamp = local + datetime.timedelta(seconds=index * seconds_per_entry)
                else:
                    pooled = p.pooled_at or p.timemodified
                    if isinstance(pooled, dict):
                        pooled = pooled.get(filename) or p.timemodified
                    stamp = _aware(pooled, "pooled_at").astimezone(zone)
                info = zipfile.ZipInfo(name, date_time=_dos_tuple(stamp))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3
                info.external_attr = 0o100644 << 16
                archive.writestr(info, data)
                names.append(name)
                index += 1
    finally:
        archive.close()
        if owned:
            owned.close()
    return names


_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
#: The format of the worksheet's "Last modified (submission)": Python's strptime
#: reads it (with English day and month names): "Monday, 5 October 2026, 9:00 PM".
MOODLE_USERDATE_STRPTIME = "%A, %d %B %Y, %I:%M %p"


def moodle_userdate(when: datetime.datetime, user_tz: str) -> str:
    """``userdate($time)`` in English: "Monday, 5 October 2026, 9:00 PM".

    lib/moodlelib.php ``userdate($date, $format = '', $timezone = 99,
    $fixday = true, $fixhour = true)`` -> calendar/type/gregorian/classes/
    structure.php ``timestamp_to_date_string``: the format is
    ``get_string('strftimedaydatetime', 'langconfig')`` = '%A, %d %B %Y, %I:%M %p'
    (public/lang/en/langconfig.php); ``fixday`` replaces %d by the day without
    its leading zero, ``fixhour`` %I by the hour without it; %p is "AM"/"PM"
    (``amcaps``/``pmcaps``; core_date::strftime maps %p to date('A')). The
    time zone is the downloading user's (``$USER->timezone``, or
    ``$CFG->forcetimezone``, else the site's). Minutes only: the seconds are
    dropped, not rounded.
    """
    local = _aware(when, "time").astimezone(_zone(user_tz))
    hour = local.hour % 12 or 12
    return (f"{_DAYS[local.weekday()]}, {local.day} {_MONTHS[local.month - 1]} {local.year}, "
            f"{hour}:{local.minute:02d} {'AM' if local.hour < 12 else 'PM'}")


def moodle_format_time(seconds: float) -> str:
    """``format_time($totalsecs)`` in English: "1 day 2 hours", "30 mins", "45 secs".

    lib/moodlelib.php ``format_time``: years, days, hours, mins, secs; the two
    largest non-zero units from the first non-zero one
    (``if ($days) return trim($odays .' '. $ohours)``...), singular for 1
    ("day", "hour", "min", "sec", "year"), "now" for 0.
    """
    total = abs(int(seconds))
    years, rem = divmod(total, 365 * 86400)
    days, rem = divmod(total - years * 365 * 86400, 86400)
    hours, rem = divmod(rem, 3600)
    mins, secs = divmod(rem, 60)

    def unit(n, one, many):
        return f"{n} {one if n == 1 else many}" if n else ""

    oy, od, oh = unit(years, "year", "years"), unit(days, "day", "days"), unit(hours, "hour", "hours")
    om, os_ = unit(mins, "min", "mins"), unit(secs, "sec", "secs")
    if years:
        return f"{oy} {od}".strip()
    if days:
        return f"{od} {oh}".strip()
    if hours:
        return f"{oh} {om}".strip()
    if mins:
        return f"{om} {os_}".strip()
    if secs:
        return os_
    return "now"


_MOODLE_STATUS = {None: "No submission", "new": "No submission", "draft": "Draft (not submitted)",
                  "submitted": "Submitted for grading", "reopened": "Reopened",
                  "marked": "Graded"}


def moodle_status(p: MoodleParticipant, due: datetime.datetime | None,
                  now: datetime.datetime, user_tz: str) -> str:
    """The worksheet's "Status" cell (no marking workflow).

    public/mod/assign/gradingtable.php ``col_status``: the status
    (``get_string('submissionstatus_' . $displaystatus)``: "Submitted for
    grading", "Draft (not submitted)", "No submission"), then
    "<format_time(timesubmitted - due)> late" (``submittedlateshort``) when
    submitted after the due date (``$due``: the extension's when granted, else
    the user override's, ``$row->duedate``, else the assignment's), "Graded" /
    "Graded - resubmitted", or "Assignment is overdue by: <format_time(now -
    due)>" when nothing was submitted and the due date passed, "Extension
    granted until: <userdate>"; when downloading the ``</div>``s become " - ":
        $o = strip_tags(rtrim(str_replace('</div>', ' - ', $o), '- '));
    """
    parts = [_MOODLE_STATUS.get(p.status, "No submission")]
    deadline = p.extension_due or p.override_due or due
    submitted = p.timemodified
    new = p.status in (None, "new")
    if deadline and submitted and not new and _utc(submitted) > _utc(deadline):
        parts.append(f"{moodle_format_time((_utc(submitted) - _utc(deadline)).total_seconds())} late")
    if p.locked:
        parts.append("Submission changes not allowed")
    if p.grade is not None and p.grade >= 0:
        parts.append("Graded - resubmitted" if p.timemarked and submitted
                     and _utc(p.timemarked) < _utc(submitted) else "Graded")
    elif (not submitted or new) and deadline and _utc(now) > _utc(deadline):
        parts.append(f"Assignment is overdue by: "
                     f"{moodle_format_time((_utc(now) - _utc(deadline)).total_seconds())}")
    if p.extension_due:
        parts.append(f"Extension granted until: {moodle_userdate(p.extension_due, user_tz)}")
    return " - ".join(parts)


def _php_fputcsv_line(cells, sep=","):
    """A row as PHP's ``fputcsv`` writes it (Spout's CSV writer calls it): a
    field is enclosed in '"' when it holds the separator, '"', '\\\\', LF, CR,
    TAB or a space; '"' doubled; an empty field is empty; LF ends the line."""
    out = []
    for cell in cells:
        text = "" if cell is None else str(cell)
        if any(c in text for c in (sep, '"', "\\", "\n", "\r", "\t", " ")):
            out.append('"' + text.replace('"', '""') + '"')
        else:
            out.append(text)
    return sep.join(out) + "\n"


def moodle_worksheet(path, participants: list[MoodleParticipant], *,
                     due: datetime.datetime | None, downloaded_at: datetime.datetime,
                     user_tz: str, max_grade: float = 10.0,
                     identity_fields: tuple = ("email",), online_text: bool = False,
                     feedback_comments: bool = True, max_grade_header: str = "Maximum grade",
                     bom: bool = True, allow_from: datetime.datetime | None = None,
                     cutoff: datetime.datetime | None = None,
                     overrides: bool | None = None) -> str:
    """Moodle's offline grading worksheet (View all submissions > Download grading worksheet).

    public/mod/assign/feedback/offline/locallib.php ``download_grades``:
    ``new assign_grading_table(..., $filename)`` -> ``is_downloading('csv')``;
    the columns of public/mod/assign/gradingtable.php ``__construct`` when
    downloading (no overrides, no groups, no marking workflow, a points grade):
        Identifier | Full name | <identity fields: Email address...> | Status |
        Grade | Maximum grade | Grade can be changed | Last modified (submission) |
        [Online text] | Last modified (grade) | [Feedback comments]
    With user or group overrides on the assignment (``overrides``; None: when
    a participant has one), ``$hasoverrides = $this->assignment->has_overrides()``
    adds three columns right after Status (``if ($hasoverrides ||
    $inrelativedatesmode)``):
        ... | Status | Allow submissions from | Due date | Cut-off date | Grade | ...
    (assign.php: allowsubmissionsfromdate 'Allow submissions from', duedate
    'Due date', cutoffdate 'Cut-off date'), each row's effective dates (the
    SQL's ``effective.*``: the row of the student's override, else the
    assignment's ``allow_from``, ``due``, ``cutoff``). An override stores
    NULL for a date it leaves as the assignment's (classes/override_manager.php
    ``parse_formdata``: "Any values set the same as the existing assignment
    are set to null"), and the SQL does not fill it in: such a cell is
    empty. ``col_allowsubmissionsfromdate``, ``col_duedate``,
    ``col_cutoffdate`` write ``userdate($row->duedate)`` when downloading,
    '' (empty) when the date is not set (0 or NULL).
    (public/mod/assign/lang/en/assign.php: recordid 'Identifier', status
    'Status', maxgrade 'Maximum grade' ('Maximum Grade' in Moodle <= 4.x:
    ``max_grade_header``), gradecanbechanged 'Grade can be changed',
    lastmodifiedsubmission 'Last modified (submission)', lastmodifiedgrade
    'Last modified (grade)'; core 'fullname' 'Full name', 'gradenoun'
    'Grade'; the comments plugin's editor field 'Feedback comments'.)
    Cells: ``col_recordid`` "Participant " . id (``hiddenuser`` is
    'Participant ' with the space); ``display_grade`` '' when ungraded else
    ``format_float(grade, 2)``; ``col_grademax`` "10.00"; "Yes";
    ``col_timesubmitted`` '-' or ``userdate(timemodified)``;
    ``col_timemarked`` '-' or ``userdate(timemarked)``. Every date is written
    in ``user_tz``, the downloading user's profile zone.
    File: the CSV dataformat (Spout): UTF-8 with a BOM, ",", '"', PHP
    ``fputcsv`` quoting, LF. Rows here by last name, first name.
    """
    headers = {"email": "Email address", "idnumber": "ID number", "username": "Username"}
    if overrides is None:
        overrides = any(p.has_override for p in participants)
    header = ["Identifier", "Full name"] + [headers[f] for f in identity_fields]
    header.append("Status")
    if overrides:
        header += ["Allow submissions from", "Due date", "Cut-off date"]
    header += ["Grade", max_grade_header, "Grade can be changed",
               "Last modified (submission)"]
    if online_text:
        header.append("Online text")
    header.append("Last modified (grade)")
    if feedback_comments:
        header.append("Feedback comments")
    lines = [_php_fputcsv_line(header)]
    for p in sorted(participants, key=lambda q: (q.lastname.casefold(), q.firstname.casefold(),
                                                 q.participant_id)):
        row = [f"Participant {p.participant_id}", p.fullname]
        row += [getattr(p, f) for f in identity_fields]
        row.append(moodle_status(p, due, downloaded_at, user_tz))
        if overrides:
            # the SQL's effective.*: the override's row when the student has one
            # (a date the override leaves as the assignment's is NULL there,
            # override_manager::clear_unused_values), else the assignment's
            dates = ((p.override_allow_from, p.override_due, p.override_cutoff)
                     if p.has_override else (allow_from, due, cutoff))
            row += ["" if date is None else moodle_userdate(date, user_tz) for date in dates]
        row.append("" if p.grade is None or p.grade < 0 else f"{p.grade:.2f}")
        row.append(f"{max_grade:.2f}")
        row.append("Yes")
        new = p.status in (None, "new")
        row.append("-" if new or p.timemodified is None
                   else moodle_userdate(p.timemodified, user_tz))
        if online_text:
            row.append("")
        row.append("-" if p.timemarked is None else moodle_userdate(p.timemarked, user_tz))
        if feedback_comments:
            row.append("")
        lines.append(_php_fputcsv_line(row))
    text = "".join(lines)
    if path is not None:
        Path(path).write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return text


# =============================================================================
# Gradescope
# =============================================================================


@dataclass
class GradescopeSubmitter:
    """One member of a submission (``:submitters:``); ``sid`` None when the
    roster has no student id for them."""

    name: str
    email: str
    sid: str | None = None
    section: str | None = None


@dataclass
class GradescopeSubmission:
    """The active submission of a student or a group; ``history`` holds the
    earlier ones as (created_at, score)."""

    submission_id: int
    submitters: list[GradescopeSubmitter]
    files: list[tuple[str, bytes]]
    created_at: datetime.datetime
    score: float | None = None
    status: str = "processed"
    results: dict | None = None
    history: list[tuple[datetime.datetime, float | None]] = field(default_factory=list)


def gradescope_time(when: datetime.datetime, zone: str | None = None) -> str:
    """``:created_at:`` as Ruby's Psych writes a Time.

    Psych ``Visitors::YAMLTree#format_time``: ``time.strftime("%Y-%m-%d
    %H:%M:%S.%9N Z")`` for a UTC time, ``"%Y-%m-%d %H:%M:%S.%9N %:z"``
    otherwise. A real export (pdewan/GradescopeToSakai
    src/main/resources/submission_metadata.yml) has
    ``:created_at: 2020-11-15 17:04:24.043103000 Z`` (microseconds, then 000).
    ``zone`` None writes UTC with "Z"; a zone name writes that offset.
    """
    when = _aware(when, "created_at")
    if zone is None:
        t = when.astimezone(UTC)
        suffix = "Z"
    else:
        t = when.astimezone(_zone(zone))
        off = t.utcoffset()
        sign = "-" if off < datetime.timedelta(0) else "+"
        minutes = abs(int(off.total_seconds())) // 60
        suffix = f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond:06d}000 " + suffix


def _yaml_scalar(value) -> str:
    """A scalar as Psych would write it (quoted only when a plain scalar
    would read back as something else: '3001', 'yes', '')."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    dumped = yaml.safe_dump(str(value), allow_unicode=True, width=10**9)
    return dumped.split("\n...")[0].rstrip("\n")


def _yaml_key_value(indent: str, key: str, value) -> str:
    # Psych writes "key: " and nothing more for nil (the real export's "extra_data: ").
    return f"{indent}{key}: {_yaml_scalar(value)}\n"


def _yaml_results(indent: str, results: dict) -> str:
    dumped = yaml.safe_dump(results, sort_keys=False, allow_unicode=True, width=80)
    return "".join(f"{indent}{line}\n" for line in dumped.splitlines())


def gradescope_metadata_yaml(submissions: list[GradescopeSubmission], zone: str | None = None) -> str:
    """``submission_metadata.yml`` of a Gradescope export.

    The shape of a real export (pdewan/GradescopeToSakai
    src/main/resources/submission_metadata.yml)::

        ---
        submission_55461422:
          :submitters:
          - :name: Teddy Randby
            :email: kerandby@live.unc.edu
            :sid: kerandby
            section_name: COMP524.001.FA20
          :created_at: 2020-11-15 17:04:24.043103000 Z
          :score: 246.75
          :status: processed
          :results:
            score: 246.75
            ...
          :history:
          - :submitters: []
            :created_at: 2020-11-15 01:43:56.933586000 Z
            ...

    Ruby symbols are written ":name" (so the keys read ":submitters",
    ":sid"... with PyYAML, as otter-grader's ``GradescopeParser`` reads
    them); one ``submission_<id>`` per active submission; a group
    submission lists every member under ``:submitters:``; numeric-looking
    SIDs are quoted ('3001').
    """
    out = ["---\n"]
    for sub in submissions:
        out.append(f"submission_{sub.submission_id}:\n")
        out.append("  :submitters:\n")
        for m in sub.submitters:
            out.append(_yaml_key_value("  - ", ":name", m.name))
            out.append(_yaml_key_value("    ", ":email", m.email))
            out.append(_yaml_key_value("    ", ":sid", m.sid))
            if m.section is not None:
                out.append(_yaml_key_value("    ", "section_name", m.section))
        out.append(f"  :created_at: {gradescope_time(sub.created_at, zone)}\n")
        out.append(_yaml_key_value("  ", ":score", sub.score))
        out.append(_yaml_key_value("  ", ":status", sub.status))
        if sub.results is not None:
            out.append("  :results:\n")
            out.append(_yaml_results("    ", sub.results))
        if sub.history:
            out.append("  :history:\n")
            for created, score in sub.history:
                out.append("  - :submitters: []\n")
                out.append(f"    :created_at: {gradescope_time(created, zone)}\n")
                out.append(_yaml_key_value("    ", ":score", score))
                out.append(_yaml_key_value("    ", ":status", "processed"))
    return "".join(out)


def gradescope_zip(path, submissions: list[GradescopeSubmission], *, assignment_id: int,
                   exported_at: datetime.datetime, zone: str | None = None) -> list[str]:
    """Write Gradescope's "Export Submissions" zip of a programming assignment.

    ``assignment_<assignment id>_export/submission_metadata.yml`` and one
    folder ``assignment_<id>_export/submission_<submission id>/`` per active
    submission holding the files as uploaded (Gradescope API clients open
    ``f"assignment_{assignment_id}_export/submission_metadata.yml"``; READMEs
    of graders describe ``/assignment_*****_export/submission_*****/``). A
    student who submitted nothing has no folder; a group has one folder.
    Entry stamps: Gradescope's code is not public; here every entry carries
    the export time in UTC (an assumption, not a source: read ``:created_at:``).
    """
    root = f"assignment_{assignment_id}_export"
    stamp = _dos_tuple(_aware(exported_at, "exported_at").astimezone(UTC))
    archive, owned = _zip_writer(path)
    names = []
    try:
        meta = f"{root}/submission_metadata.yml"
        archive.writestr(zipfile.ZipInfo(meta, date_time=stamp),
                         gradescope_metadata_yaml(submissions, zone).encode("utf-8"),
                         compress_type=zipfile.ZIP_DEFLATED)
        names.append(meta)
        for sub in sorted(submissions, key=lambda s: s.submission_id):
            for filename, data in sub.files:
                name = f"{root}/submission_{sub.submission_id}/{filename}"
                archive.writestr(zipfile.ZipInfo(name, date_time=stamp), data,
                                 compress_type=zipfile.ZIP_DEFLATED)
                names.append(name)
    finally:
        archive.close()
        if owned:
            owned.close()
    return names


def gradescope_roster_csv(path, students: list[GradescopeSubmitter]) -> str:
    """A plain roster ``student_id,name,email`` (the kit's csv roster; not a
    Gradescope file: its roster download's columns are not documented)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student_id", "name", "email"])
    for s in students:
        writer.writerow([s.sid or s.email.split("@")[0], s.name, s.email])
    text = buffer.getvalue()
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


# =============================================================================
# A whole class
# =============================================================================


@dataclass
class TrueStudent:
    """What really happened to one student (the test's answer key).

    ``key``: the id the roster gives them (Canvas: SIS Login ID; Moodle: the
    email's local part, the worksheet having no ID number; Gradescope: the
    SID, else the email's local part). ``lms_id``: Canvas user id, Moodle
    participant id, Gradescope SID. ``submitted_at``: the true submission time
    (UTC; None: nothing submitted). ``late``/``seconds_late``: by the LMS's
    own rule against the course due date (no grace). ``marked_late``: Canvas
    wrote LATE in the file name. ``group``: the keys of a Gradescope group,
    self included. ``files``: the student's entries in the download.
    ``sample``: the lab 1 sample notebook used. ``cases``: which tricky cases
    the student is.
    """

    key: str
    name: str
    email: str
    lms_id: str
    submitted_at: datetime.datetime | None
    late: bool
    seconds_late: int
    marked_late: bool = False
    group: tuple = ()
    files: tuple = ()
    sample: str | None = None
    cases: tuple = ()
    lms_extension_until: datetime.datetime | None = None


@dataclass
class LmsClass:
    """A class of one LMS: its download, roster and (Canvas) API times, and the truth."""

    lms: str
    due: datetime.datetime
    built_at: datetime.datetime
    download_name: str
    download: bytes
    roster_name: str
    roster: bytes
    truth: list[TrueStudent]
    times_name: str | None = None
    times: bytes | None = None

    def write(self, folder) -> dict:
        """Write the files into ``folder``; {"download": path, "roster": path, "times": path}."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = {"download": folder / self.download_name, "roster": folder / self.roster_name}
        paths["download"].write_bytes(self.download)
        paths["roster"].write_bytes(self.roster)
        if self.times is not None:
            paths["times"] = folder / self.times_name
            paths["times"].write_bytes(self.times)
        return paths

    def by_key(self) -> dict:
        return {t.key: t for t in self.truth}


_FIRST = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy",
          "Karl", "Laura", "Mallory", "Niaj", "Olivia", "Peggy", "Quentin", "Rupert", "Sybil",
          "Trent", "Ursula", "Victor", "Wendy", "Xavier", "Yvonne", "Zach", "Amir", "Bea",
          "Chidi", "Dana", "Emeka", "Fatima", "Gus", "Hana", "Ines", "Jon", "Kemal", "Lina"]
_LAST = ["Able", "Brown", "Chen", "Doe", "Evans", "Fischer", "Garcia", "Hughes", "Ito",
         "Jones", "Kowalski", "Lopez", "Meyer", "Nakamura", "Okafor", "Patel", "Quinn",
         "Rossi", "Schmidt", "Tanaka", "Ueda", "Vargas", "Wong", "Xu", "Young", "Zimmer",
         "Abara", "Bauer", "Costa", "Dubois", "Eze", "Farah", "Gomez", "Haddad", "Ivanova",
         "Jensen", "Kaur", "Lund"]


def _default_due():
    return datetime.datetime(2026, 10, 5, 23, 59, tzinfo=_zone("America/New_York"))


def _base_people(n):
    return [(_FIRST[i % len(_FIRST)] + ("" if i < len(_FIRST) else str(i)),
             _LAST[i % len(_LAST)]) for i in range(n)]


def _sample(i):
    """(file name as uploaded, bytes, sample path under data/sample_submissions/lab1)."""
    filename, path = SAMPLE_FILES[i % len(SAMPLE_FILES)]
    return filename, path.read_bytes(), path.relative_to(SAMPLES).as_posix()


def _times(rng, due, n, cases):
    """Each student's true submission time (UTC) from the cases: on time by
    default, a few minutes to three days early, with seconds."""
    out = []
    for i in range(n):
        kind = cases.get(i, "on time")
        if kind == "none":
            out.append(None)
        elif kind == "late 26h":
            out.append(due + datetime.timedelta(hours=26, seconds=rng.randint(1, 59)))
        elif kind == "late 10min":
            out.append(due + datetime.timedelta(minutes=10, seconds=rng.randint(1, 59)))
        elif kind == "late 3d":
            out.append(due + datetime.timedelta(days=3, hours=2, minutes=rng.randint(1, 59)))
        elif kind == "late 30s":
            out.append(due + datetime.timedelta(seconds=30))
        elif kind == "at due":
            out.append(due)
        else:
            out.append(due - datetime.timedelta(minutes=rng.randint(5, 3 * 24 * 60),
                                                seconds=rng.randint(0, 59)))
    return [None if t is None else t.astimezone(UTC) for t in out]


def lms_class(lms: str, n: int = 33, due: datetime.datetime | None = None, seed: int = 0,
              built_after: datetime.timedelta = datetime.timedelta(days=10, hours=14, minutes=4,
                                                                    seconds=6)) -> LmsClass:
    """A class of ``n`` students of ``lms`` ("canvas", "moodle", "gradescope").

    The download is built ``built_after`` the due date (ten days and a bit:
    every zip stamp is far past the due date). Contents cycle through the lab 1
    samples (data/sample_submissions/lab1). Tricky cases (``TrueStudent.cases``):

    - every LMS: an on-time student, late ones (26 h, 10 min), two who sent
      nothing, one exactly at the due date;
    - canvas: a student whose sortable name is "Points Possible"; "Lee, Ann"
      whose download name "leeann" is classmate Leeann Ng's SIS Login ID; a
      resubmission ("lab1_attention-1.ipynb", attempt 2); an accented name
      ("Núñez, José" -> "núñezjosé"); "O'Neil-Smith, Kate"; 30 s late
      (LATE: Canvas has no grace); the Student View student in the gradebook;
    - moodle: two participants named "Jane Doe"; a draft (in the zip, status
      "Draft (not submitted)"); "Mary_Ann Lee" (folder "Mary Ann Lee_..."),
      "Seán O'Brien" (folder "Seán OBrien_..."); a 2-day Moodle extension;
    - gradescope: a group of three and a group of two (one folder each), a
      student without SID, a resubmission (``:history:``).
    """
    if lms not in ("canvas", "moodle", "gradescope"):
        raise ValueError(f"lms must be canvas, moodle or gradescope, not {lms!r}")
    if n < 16:
        raise ValueError("a class needs at least 16 students for its tricky cases")
    due = _aware(due or _default_due(), "due")
    built = (due + built_after).astimezone(UTC)
    rng = random.Random(seed)
    return {"canvas": _canvas_class, "moodle": _moodle_class,
            "gradescope": _gradescope_class}[lms](n, due, built, rng)


def _canvas_class(n, due, built, rng):
    people = _base_people(n)
    special = {4: ("Points", "Possible"), 5: ("Ann", "Lee"), 6: ("Leeann", "Ng"),
               7: ("José", "Núñez"), 8: ("Kate", "O'Neil-Smith")}
    cases = {1: "late 26h", 2: "late 10min", 9: "none", 10: "none", 11: "late 3d",
             12: "late 30s", 13: "at due"}
    labels = {0: "on-time", 1: "late", 2: "late", 3: "resubmitted", 4: "points-possible-name",
              5: "name-cleans-to-classmate-id", 6: "classmate-of-name-clash", 7: "accented-name",
              8: "apostrophe-hyphen-name", 9: "no-submission", 10: "no-submission", 11: "late",
              12: "late-by-seconds", 13: "at-due-date"}
    times = _times(rng, due, n, cases)
    students, subs, truth = [], [], []
    attachment_ids = iter(range(90001, 90001 + 10 * n))
    order = sorted((t, i) for i, t in enumerate(times) if t is not None)
    att_for = {i: next(attachment_ids) for _, i in order}  # ids grow with upload time
    for i, (first, last) in enumerate(people):
        first, last = special.get(i, (first, last))
        uid = 1001 + i
        if i == 4:
            sortable = "Points Possible"  # set by SIS/the user: the Student cell reads "Points Possible"
        else:
            sortable = f"{last}, {first}"
        login = {5: "alee", 6: "leeann"}.get(i, (first[0] + re.sub(r"[^a-z]", "", _ascii(last).lower())).lower())
        s = CanvasStudent(uid, f"{first} {last}", sortable, login_id=login,
                          sis_user_id=f"S{uid}", section="Section A" if i % 2 == 0 else "Section B",
                          email=f"{login}@uni.example")
        students.append(s)
        when = times[i]
        filename, data, sample = _sample(i)
        sub = CanvasSubmission(s, 50000 + uid, due_at=due, submitted_at=when)
        if when is not None:
            sub.submission_type = "online_upload"
            sub.attempt = 1
            display = filename
            if i == 3:  # resubmitted: the second upload of the same name is renamed
                sub.attempt = 2
                display = canvas_resubmission_name(filename, [filename])
            sub.files = [CanvasFile(att_for[i], display, data)]
        subs.append(sub)
        truth.append(TrueStudent(
            key=login, name=s.name, email=s.email, lms_id=str(uid), submitted_at=when,
            late=sub.late, seconds_late=sub.seconds_late, marked_late=sub.late,
            files=tuple(canvas_entry_names(sub)), sample=sample if when else None,
            cases=(labels.get(i, "on-time"),)))
    buffer = io.BytesIO()
    canvas_zip(buffer, subs, built)
    test = CanvasStudent(1000, "Test Student", "Student, Test", section="Section A")
    roster = canvas_gradebook_csv(None, students, assignment_title="Lab 1", assignment_id=4321,
                                  test_student=test)
    api = canvas_submissions_json(None, subs, course_id=77, assignment_id=4321, now=built)
    return LmsClass("canvas", due, built, "lab1_canvas.zip", buffer.getvalue(),
                    "canvas_gradebook.csv", roster.encode("utf-8"), truth,
                    times_name="canvas_submissions.json",
                    times=(json.dumps(api, separators=(",", ":")) + "\n").encode("utf-8"))


def _ascii(text):
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _moodle_class(n, due, built, rng):
    people = _base_people(n)
    special = {4: ("Jane", "Doe"), 5: ("Jane", "Doe"), 6: ("Mary_Ann", "Lee"),
               7: ("Seán", "O'Brien")}
    cases = {1: "late 26h", 2: "late 10min", 8: "none", 9: "none", 10: "late 3d",
             11: "late 26h", 12: "at due"}
    labels = {0: "on-time", 1: "late", 2: "late", 3: "draft", 4: "same-full-name",
              5: "same-full-name", 6: "underscore-in-name", 7: "apostrophe-accent-name",
              8: "no-submission", 9: "no-submission", 10: "late", 11: "moodle-extension",
              12: "at-due-date"}
    times = _times(rng, due, n, cases)
    parts, truth = [], []
    for i, (first, last) in enumerate(people):
        first, last = special.get(i, (first, last))
        pid = 200001 + i
        local = {4: "jane.doe", 5: "jdoe2"}.get(i, f"{_ascii(first).lower()}.{re.sub(r'[^a-z]', '', _ascii(last).lower())}")
        p = MoodleParticipant(pid, first, last, email=f"{local}@uni.example")
        when = times[i]
        filename, data, sample = _sample(i)
        if when is not None:
            p.status = "draft" if i == 3 else "submitted"
            p.timemodified = when
            p.files = [(filename, data)]
            # the draft upload reached the file pool before the submission was saved
            p.pooled_at = when - datetime.timedelta(minutes=rng.randint(1, 90))
        if i == 11:
            p.extension_due = due + datetime.timedelta(days=2)
        parts.append(p)
        seconds = 0 if when is None else max(0, int((when - due.astimezone(UTC)).total_seconds()))
        truth.append(TrueStudent(
            key=local, name=p.fullname, email=p.email, lms_id=str(pid), submitted_at=when,
            late=seconds > 0, seconds_late=seconds,
            files=tuple(moodle_entry_name(p, f) for f, _ in p.files),
            sample=sample if when else None, cases=(labels.get(i, "on-time"),),
            lms_extension_until=p.extension_due))
    buffer = io.BytesIO()
    moodle_zip(buffer, parts, built, server_tz="America/New_York")
    sheet = moodle_worksheet(None, parts, due=due, downloaded_at=built, user_tz="America/New_York")
    return LmsClass("moodle", due, built, "lab1_moodle.zip", buffer.getvalue(),
                    "moodle_worksheet.csv", b"\xef\xbb\xbf" + sheet.encode("utf-8"), truth)


def _gradescope_class(n, due, built, rng):
    people = _base_people(n)
    cases = {1: "late 26h", 2: "late 10min", 8: "none", 9: "none", 11: "late 3d", 12: "at due"}
    labels = {0: "resubmitted", 1: "late", 2: "late", 3: "group-of-3", 4: "group-of-3",
              5: "group-of-3", 6: "group-of-2", 7: "group-of-2", 8: "no-submission",
              9: "no-submission", 10: "no-sid", 11: "late", 12: "at-due-date"}
    times = _times(rng, due, n, cases)
    groups = {3: (3, 4, 5), 4: (3, 4, 5), 5: (3, 4, 5), 6: (6, 7), 7: (6, 7)}
    members = []
    for i, (first, last) in enumerate(people):
        email = f"{_ascii(first).lower()}.{_ascii(last).lower()}@uni.example"
        members.append(GradescopeSubmitter(f"{first} {last}", email,
                                           None if i == 10 else str(3001 + i)))
    subs, truth, done = [], [], set()
    for i, m in enumerate(members):
        group = groups.get(i, (i,))
        when = times[group[0]]
        if when is not None and group[0] not in done:
            done.add(group[0])
            filename, data, _ = _sample(group[0])
            # Gradescope keeps microseconds; the one at the due date is exactly on it
            created = when if cases.get(group[0]) == "at due" else \
                when.replace(microsecond=rng.randint(0, 999999))
            sub = GradescopeSubmission(
                submission_id=410000000 + 7919 * (i + 1), submitters=[members[j] for j in group],
                files=[(filename, data)], created_at=created, score=None, status="processed")
            if i == 0:
                sub.history = [(when - datetime.timedelta(hours=5), None)]
            subs.append(sub)
    by_member = {}
    for sub in subs:
        for m in sub.submitters:
            by_member[m.email] = sub
    for i, m in enumerate(members):
        key = m.sid or m.email.split("@")[0]
        sub = by_member.get(m.email)
        when = sub.created_at if sub else None
        seconds = 0 if when is None else max(0, int((when - due.astimezone(UTC)).total_seconds()))
        group_keys = tuple((x.sid or x.email.split("@")[0]) for x in sub.submitters) \
            if sub and len(sub.submitters) > 1 else ()
        files = tuple(f"assignment_77_export/submission_{sub.submission_id}/{f}"
                      for f, _ in sub.files) if sub else ()
        sample = _sample(groups.get(i, (i,))[0])[2] if sub else None
        truth.append(TrueStudent(key=key, name=m.name, email=m.email, lms_id=m.sid or "",
                                 submitted_at=when, late=seconds > 0, seconds_late=seconds,
                                 group=group_keys, files=files, sample=sample,
                                 cases=(labels.get(i, "on-time"),)))
    buffer = io.BytesIO()
    gradescope_zip(buffer, subs, assignment_id=77, exported_at=built)
    roster = gradescope_roster_csv(None, members)
    return LmsClass("gradescope", due, built, "lab1_gradescope.zip", buffer.getvalue(),
                    "gradescope_roster.csv", roster.encode("utf-8"), truth)
