"""A recorded statement's TimeZone carried with its text (parser/semantics/zoned_text.py): tagging is
reversible, UTC adds nothing, a text is tagged once, sqlglot's rendering keeps the tag (the predictor's
templates go through it), and a zone this host cannot read refuses as SET TIME ZONE would. False-failure
rate 0."""

from __future__ import annotations

import pytest
import sqlglot

from parser.semantics.session_zone import current
from parser.semantics.zoned_text import planned_in_zone, tagged, untagged
from pgcore.errors import Refusal

SQL = "SELECT count(*) FROM events WHERE ts >= '2026-03-29'"


def test_tagging_round_trips_and_utc_adds_nothing() -> None:
    text = tagged(SQL, "Europe/Berlin")
    assert untagged(text) == ("Europe/Berlin", SQL)
    assert tagged(text, "Asia/Tokyo") == text
    assert tagged(SQL, None) == SQL and untagged(SQL) == (None, SQL)
    assert untagged(tagged(SQL, "<+03>-03")) == ("<+03>-03", SQL)


def test_sqlglot_keeps_the_tag() -> None:
    rendered = sqlglot.parse_one(tagged(SQL, "Europe/Berlin"), read="postgres").sql("postgres")
    assert untagged(rendered)[0] == "Europe/Berlin"


def test_planned_in_zone_sets_the_zone_and_refuses_an_unknown_one() -> None:
    with planned_in_zone(tagged(SQL, "Europe/Berlin")) as text:
        zone = current()
        assert text == SQL and zone is not None and zone.key == "Europe/Berlin"
    assert current() is None
    with planned_in_zone(SQL):
        assert current() is None
    with pytest.raises(Refusal) as e, planned_in_zone(tagged(SQL, "Not/AZone")):
        pass
    assert e.value.sqlstate == "22023"
