"""Tests of labkit.datasets: the date pairs of lab 5, their split and vocabularies.

Every human-written date is read back to its ISO date by a parser written here,
independently of the generator (its own month and weekday names, one regular
expression per format).
"""

from __future__ import annotations

import datetime
import re
import tomllib

import numpy as np
import pytest

from labkit import datasets

MONTHS = {  # name -> month number, every language and abbreviation
    **{name: i + 1 for i, name in enumerate(
        "January February March April May June July August September October "
        "November December".split())},
    **{name: i + 1 for i, name in enumerate(
        "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())},
    **{name: i + 1 for i, name in enumerate(
        "janvier février mars avril mai juin juillet août septembre octobre "
        "novembre décembre".split())},
    **{name: i + 1 for i, name in enumerate(
        "Januar Februar März April Mai Juni Juli August September Oktober "
        "November Dezember".split())},
    **{name: i + 1 for i, name in enumerate(
        "enero febrero marzo abril mayo junio julio agosto septiembre octubre "
        "noviembre diciembre".split())},
}
WEEKDAYS = {  # name -> ISO weekday (Monday = 1)
    **{name: i + 1 for i, name in enumerate(
        "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split())},
    **{name: i + 1 for i, name in enumerate(
        "lundi mardi mercredi jeudi vendredi samedi dimanche".split())},
    **{name: i + 1 for i, name in enumerate(
        "Montag Dienstag Mittwoch Donnerstag Freitag Samstag Sonntag".split())},
}
WORD = r"([^\W\d_]+)"
PATTERNS = [  # (regex, group order: names of the groups in order)
    (rf"^{WORD}, {WORD} (\d{{1,2}}), (\d{{4}})$", ("weekday", "month", "day", "year")),
    (rf"^{WORD} (\d{{1,2}})(?:st|nd|rd|th), (\d{{4}})$", ("month", "day", "year")),
    (rf"^{WORD} (\d{{1,2}}), (\d{{4}})$", ("month", "day", "year")),
    (rf"^{WORD}, (\d{{1,2}})\. {WORD} (\d{{4}})$", ("weekday", "day", "month", "year")),
    (rf"^(\d{{1,2}})\. {WORD} (\d{{4}})$", ("day", "month", "year")),
    (rf"^(\d{{1,2}}) de {WORD} de (\d{{4}})$", ("day", "month", "year")),
    (rf"^{WORD} (\d{{1,2}}|1er) {WORD} (\d{{4}})$", ("weekday", "day", "month", "year")),
    (rf"^(\d{{1,2}}|1er) {WORD} (\d{{4}})$", ("day", "month", "year")),
    (r"^(\d{2})/(\d{2})/(\d{2})$", ("month", "day", "yy")),
    (r"^(\d{2})\.(\d{2})\.(\d{4})$", ("day", "month", "year")),
    (r"^(\d{4})年(\d{1,2})月(\d{1,2})日$", ("year", "month", "day")),
]


def parse(text: str) -> str:
    """The ISO date a human-written date means, or an AssertionError."""
    for pattern, names in PATTERNS:
        match = re.match(pattern, text)
        if not match:
            continue
        parts = dict(zip(names, match.groups()))
        month = parts["month"]
        month = int(month) if month.isdigit() else MONTHS[month]
        day = 1 if parts["day"] == "1er" else int(parts["day"])
        if "yy" in parts:
            yy = int(parts["yy"])
            year = 1900 + yy if yy >= 50 else 2000 + yy
        else:
            year = int(parts["year"])
        date = datetime.date(year, month, day)
        if "weekday" in parts:
            assert WEEKDAYS[parts["weekday"]] == date.isoweekday(), text
        return date.isoformat()
    raise AssertionError(f"no format matches {text!r}")


SPECIAL_DAYS = ["1950-01-01", "2049-12-31", "2000-02-29", "1999-12-31", "2024-03-01",
                "2011-11-11", "2012-12-12", "2013-01-13", "1987-07-21", "1987-07-22",
                "1987-07-23", "2003-08-02", "1970-10-31", "2049-09-30"]


@pytest.mark.parametrize("format_name", list(datasets.FORMATS))
def test_every_format_reads_back_to_its_iso_date(format_name):
    generator = np.random.default_rng(0)
    span = (datasets.LAST_DAY - datasets.FIRST_DAY).days
    days = [datasets.FIRST_DAY + datetime.timedelta(days=int(d))
            for d in generator.integers(0, span + 1, size=300)]
    days += [datetime.date.fromisoformat(day) for day in SPECIAL_DAYS]
    for day in days:
        text = datasets.format_date(day, format_name)
        assert parse(text) == day.isoformat(), (format_name, text)


def test_generated_pairs_read_back_and_use_every_format():
    pairs = datasets.dates(3000, seed=3)
    assert all(parse(human) == iso for human, iso in pairs)
    # All 13 formats appear (each has its own pattern or language).
    assert len({re.sub(r"\d", "0", human) for human, _ in pairs}) > 100
    assert any("年" in human for human, _ in pairs) and any(" de " in human for human, _ in pairs)


def test_the_same_seed_gives_the_same_pairs_and_another_seed_others():
    assert datasets.dates(500, seed=7) == datasets.dates(500, seed=7)
    assert datasets.dates(500, seed=7) != datasets.dates(500, seed=8)
    assert datasets.dates(200, seed=7) == datasets.dates(500, seed=7)[:200]
    assert datasets.dates(0) == []


def test_known_examples():
    assert datasets.format_date("2020-03-03", "en_weekday") == "Tuesday, March 3, 2020"
    assert datasets.format_date("2020-03-03", "de_weekday") == "Dienstag, 3. März 2020"
    assert datasets.format_date("2020-03-03", "us_numeric") == "03/03/20"
    assert datasets.format_date("2021-03-01", "fr") == "1er mars 2021"
    assert datasets.format_date("2021-03-03", "ja") == "2021年3月3日"
    assert datasets.format_date("2021-03-22", "en_ordinal") == "March 22nd, 2021"


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="Unknown format"):
        datasets.format_date("2020-03-03", "klingon")
    with pytest.raises(ValueError, match="1950-01-01"):
        datasets.format_date("1776-07-04", "en_short")
    with pytest.raises(ValueError, match="non-negative"):
        datasets.dates(-1)
    with pytest.raises(ValueError, match="Unknown format"):
        datasets.dates(3, formats=["en_short", "nope"])


def test_split_parts_share_no_date_and_do_not_depend_on_n():
    pairs = datasets.dates(20_000, seed=0)
    train, validation, test = datasets.split(pairs)
    assert len(train) + len(validation) + len(test) == len(pairs)
    dates = [{iso for _, iso in part} for part in (train, validation, test)]
    assert not (dates[0] & dates[1]) and not (dates[0] & dates[2]) and not (dates[1] & dates[2])
    assert 0.08 < len(test) / len(pairs) < 0.12 and 0.08 < len(validation) / len(pairs) < 0.12
    # The part of a date depends on the date and the seed only.
    small = datasets.split(pairs[:3000])
    for part, big_part in zip(small, (train, validation, test)):
        assert set(part) <= set(big_part)
    assert datasets.split(pairs, seed=1)[2] != test
    with pytest.raises(ValueError):
        datasets.split(pairs, validation_fraction=0.6, test_fraction=0.5)


def test_vocabularies_cover_every_format_and_round_trip():
    pairs = datasets.dates(5000, seed=1)
    source, target = datasets.SOURCE_VOCABULARY, datasets.TARGET_VOCABULARY
    assert (source.pad_id, source.start_id, source.end_id) == (0, 1, 2)
    assert target.size == 14 and target.tokens[3:] == list("0123456789-")
    longest = max(len(human) for human, _ in pairs)
    assert longest <= datasets.SOURCE_LENGTH
    humans = [human for human, _ in pairs]
    ids = source.encode(humans, length=datasets.SOURCE_LENGTH)
    assert ids.dtype == np.int32 and ids.shape == (5000, datasets.SOURCE_LENGTH)
    assert not np.any(ids == source.unknown_id), "a generated character is not in the vocabulary"
    assert source.decode(ids) == humans
    assert source.decode(source.encode(["3 März 2021 ☃"])[0]) == "3 März 2021 <UNK>"


def test_encode_pairs_shifts_the_target_by_one():
    (context, target_in), target_out = datasets.encode_pairs(
        [("3 mars 2021", "2021-03-03"), ("03.03.2021", "2021-03-03")])
    assert context.shape == (2, datasets.SOURCE_LENGTH)
    assert target_in.shape == target_out.shape == (2, datasets.TARGET_LENGTH)
    target = datasets.TARGET_VOCABULARY
    np.testing.assert_array_equal(target_in[:, 0], [1, 1])
    np.testing.assert_array_equal(target_in[:, 1:], target_out[:, :-1])
    np.testing.assert_array_equal(target_out[:, -1], [2, 2])
    assert target.decode(target_out[0]) == "2021-03-03"
    assert datasets.SOURCE_VOCABULARY.decode(context[0]) == "3 mars 2021"
    assert context[0, len("3 mars 2021"):].tolist() == [0] * (32 - len("3 mars 2021"))


def test_toy_dialogue_keeps_the_lecture_word_ids():
    toy = datasets.toy_dialogue()
    vocabulary = toy["vocabulary"]
    assert toy["pairs"] == [("how are you", "i am fine"), ("i am fine", "how about yourself")]
    assert vocabulary.size == 11  # the lecture's output layer of size 11
    assert vocabulary.encode(["how are you"])[0].tolist() == [5, 8, 9]
    assert vocabulary.encode(["i am"], start=True)[0].tolist() == [1, 6, 3]
    assert vocabulary.encode(["i am fine"], end=True)[0].tolist() == [6, 3, 4, 2]
    for word in ("am", "fine", "how", "i", "about", "are", "you", "yourself"):
        assert toy["lecture_ids"][word] == vocabulary.tokens.index(word)
    assert toy["lecture_ids"]["<SOS>"] == 0 and vocabulary.tokens[0] == "<PAD>"
    with pytest.raises(ValueError):
        vocabulary.encode(["how old are you"])


def test_the_checkpoint_ships_as_package_data(root):
    weights, metadata = datasets.pretrained_checkpoint()
    assert weights.name == "dates_transformer.weights.h5"
    assert weights.stat().st_size < 3 * 2 ** 20
    assert {"hyperparameters", "history", "training_seconds", "test_exact_match",
            "trained_on"} <= set(metadata)
    assert metadata["target_vocab_size"] == datasets.TARGET_VOCABULARY.size
    assert metadata["input_vocab_size"] == datasets.SOURCE_VOCABULARY.size
    assert len(metadata["history"]["loss"]) == metadata["training"]["epochs"]
    settings = tomllib.loads((root / "student" / "pyproject.toml").read_text())
    patterns = settings["tool"]["setuptools"]["package-data"]["labkit"]
    assert "checkpoints/*.weights.h5" in patterns and "checkpoints/*.json" in patterns
    with pytest.raises(FileNotFoundError, match="TRAIN = True"):
        datasets.pretrained_checkpoint("no_such_model")


def test_the_module_states_its_licence():
    assert "CC0" in datasets.__doc__ and "MIT" in datasets.__doc__
