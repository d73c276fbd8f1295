"""The filter spec, its Elasticsearch translation and the plain-output dedupe, as pure functions."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone

import pytest

from hvdlog.analyses.summary import one_line
from hvdlog.cli.output import Printer, dedupe
from hvdlog.query.es_query import pattern_clauses, to_query
from hvdlog.query.spec import Condition, Filter, FilterError, format_ranks, parse_ranks, parse_steps, parse_time


def _doc(rank: int, ts: str, message: str = "m", level: str = "info", **extra: object) -> dict[str, object]:
    return {"@timestamp": ts, "rank": rank, "message": message, "log": {"level": level}, **extra}


class TestRanks:
    def test_list_and_ranges(self) -> None:
        """`0,3,8-10` names exactly those ranks, and formats back the same way."""
        ranks = parse_ranks("0,3,8-10")
        assert ranks == {0, 3, 8, 9, 10}
        assert format_ranks(ranks) == "0,3,8-10"

    def test_huge_ranges_are_intervals(self) -> None:
        """`0-99999999` is two numbers: membership is exact at both ends, overlaps merge."""
        ranks = parse_ranks("0-99999999,5,100000000-100000001,7-9")
        assert ranks.intervals == ((0, 100000001),)
        assert 0 in ranks and 100000001 in ranks and 100000002 not in ranks and -1 not in ranks and "3" not in ranks
        assert format_ranks(parse_ranks("12-20,0,3")) == "0,3,12-20"

    def test_rank_beyond_a_c_int_is_refused(self) -> None:
        """A rank no Horovod job can have is a typo, said so."""
        with pytest.raises(FilterError, match="ranks go up to"):
            parse_ranks("0-99999999999")

    def test_format_takes_what_data_gives(self) -> None:
        """Analyses format ranks from data: a scalar or junk never raises."""
        assert format_ranks(5) == "5"
        assert format_ranks("0,1") == "" and format_ranks([1, "x", None, 2]) == "1-2"

    @pytest.mark.parametrize("text", ["", "a", "3-1", "1,,2", "-2"])
    def test_bad_lists_say_why(self, text: str) -> None:
        """A bad rank list raises with the expected form in the message."""
        with pytest.raises(FilterError, match="rank"):
            parse_ranks(text)


class TestSteps:
    @pytest.mark.parametrize(("text", "bounds"), [("2:5", (2, 5)), ("2:", (2, None)), (":5", (None, 5)), ("7", (7, 7))])
    def test_forms(self, text: str, bounds: tuple[int | None, int | None]) -> None:
        """A:B, A:, :B and a single step."""
        assert parse_steps(text) == bounds

    @pytest.mark.parametrize("text", [":", "5:2", "x"])
    def test_bad(self, text: str) -> None:
        """Empty, reversed or non-numeric ranges are refused."""
        with pytest.raises(FilterError):
            parse_steps(text)


class TestTime:
    def test_relative_and_iso(self) -> None:
        """`10m` is ten minutes before now; a zone-less ISO time is UTC."""
        now = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
        assert parse_time("10m", now) == now - timedelta(minutes=10)
        assert parse_time("2026-11-29T11:00:00") == datetime(2026, 11, 29, 11, tzinfo=timezone.utc)

    def test_bad(self) -> None:
        """Nonsense is refused with the accepted forms in the message."""
        with pytest.raises(FilterError, match="ISO 8601"):
            parse_time("yesterday-ish")


class TestFilter:
    def test_level_is_a_minimum_and_unknown_counts_as_info(self) -> None:
        """--level warning keeps warning and error, drops info; a doc without level counts as info."""
        spec = Filter(min_level="warning")
        assert spec.matches(_doc(0, "2026-01-01T00:00:00Z", level="error"))
        assert not spec.matches(_doc(0, "2026-01-01T00:00:00Z", level="info"))
        assert not spec.matches({"rank": 0, "message": "raw"})
        assert Filter(min_level="info").matches({"rank": 0, "message": "raw"})

    def test_times_compare_at_millisecond_resolution(self) -> None:
        """Like Elasticsearch's date type: .123456 and an --until of .123000 are the same millisecond."""
        spec = Filter(until=datetime(2026, 1, 1, 0, 0, 0, 123000, tzinfo=timezone.utc))
        assert spec.matches(_doc(0, "2026-01-01T00:00:00.123456Z"))
        assert not spec.matches(_doc(0, "2026-01-01T00:00:00.124000Z"))

    def test_a_document_without_a_time_matches_time_bounds_only_when_untimed_asks(self) -> None:
        """(hvdlog.analyses.last_words reads a rank from a WARN's time on without losing its untimed lines.)"""
        since = datetime(2026, 1, 1, tzinfo=timezone.utc)
        untimed = {"rank": 0, "message": "Epoch 2/3"}
        assert not Filter(since=since).matches(untimed)
        assert Filter(since=since, untimed=True).matches(untimed)
        assert not Filter(since=since, untimed=True).matches(_doc(0, "2025-12-31T23:59:59.999Z"))
        assert Filter(since=since, untimed=True).matches(_doc(0, "2026-01-01T00:00:00.000Z"))

    def test_pattern_searches_message_and_error_fields(self) -> None:
        """A fixed string matches in message or error.*; -i ignores case; -E takes a regex."""
        doc = _doc(1, "2026-01-01T00:00:00Z", "uncaught", error={"type": "X", "message": "injected fault on rank 1"})
        assert Filter(pattern="fault on").matches(doc)
        assert not Filter(pattern="FAULT").matches(doc)
        assert Filter(pattern="FAULT", ignore_case=True).matches(doc)
        assert Filter(pattern=r"rank \d", regex=True).matches(doc)
        assert not Filter(pattern="rank.1").matches(doc)  # fixed string: the dot is a dot

    def test_bad_regex(self) -> None:
        """An invalid regular expression is refused at construction."""
        with pytest.raises(FilterError, match="regular expression"):
            Filter(pattern="(", regex=True)

    def test_ranks_steps_and_any_of(self) -> None:
        """Missing rank or step never match a rank or step filter; any_of needs one clause."""
        assert not Filter(ranks=frozenset({0})).matches({"message": "x"})
        assert Filter(steps=(2, 3)).matches(_doc(0, "2026-01-01T00:00:00Z", step=3))
        assert not Filter(steps=(2, 3)).matches(_doc(0, "2026-01-01T00:00:00Z", step=4))
        spec = Filter(any_of=(Condition("event.action", ("stall",)), Condition("log.level", min_level="error")))
        assert spec.matches(_doc(0, "2026-01-01T00:00:00Z", event={"action": "stall"}))
        assert spec.matches(_doc(0, "2026-01-01T00:00:00Z", level="critical"))
        assert not spec.matches(_doc(0, "2026-01-01T00:00:00Z"))


class TestElasticsearchQuery:
    def test_pattern_words_between_spaces_are_terms_others_wildcards(self) -> None:
        """Only a run that stands alone between spaces is certainly a whole token."""
        clauses = pattern_clauses("Horovod has been shut down", "message")
        assert clauses[1] == {"term": {"message": "has"}}
        assert clauses[0]["wildcard"]["message"]["value"] == "*horovod*"
        assert clauses[-1]["wildcard"]["message"]["value"] == "*down*"
        assert all("wildcard" in c for c in pattern_clauses("_DistributedOptimizer.step", "message"))

    def test_rank_ranges_become_range_clauses(self) -> None:
        """A huge --rank range is one range clause, never a list of every rank."""
        query = to_query(Filter(ranks=parse_ranks("0-99999999,200000000")))
        clauses = query["bool"]["filter"][0]["bool"]["should"]
        assert {"range": {"rank": {"gte": 0, "lte": 99999999}}} in clauses and {"terms": {"rank": [200000000]}} in clauses
        assert to_query(Filter(ranks=parse_ranks("3")))["bool"]["filter"] == [{"terms": {"rank": [3]}}]

    def test_level_info_also_takes_unknown_levels(self) -> None:
        """At info or below, documents with no or unknown level must come back too."""
        query = to_query(Filter(min_level="info"))
        assert "must_not" in str(query)
        assert "must_not" not in str(to_query(Filter(min_level="error")))


class TestDedupe:
    def test_same_message_from_several_ranks_collapses(self) -> None:
        """Ranks 0-3 printing the same line within the window become one line naming them."""
        docs = [_doc(rank, f"2026-01-01T00:00:00.{rank}00Z", "Horovod has been shut down") for rank in range(4)]
        groups = list(dedupe(docs, window=2.0))
        assert len(groups) == 1
        assert groups[0].ranks == {0, 1, 2, 3}

    def test_same_rank_repeating_and_far_apart_stay_separate(self) -> None:
        """A rank repeating itself, or a copy outside the window, is its own line, in time order."""
        docs = [
            _doc(0, "2026-01-01T00:00:00Z", "tick"),
            _doc(0, "2026-01-01T00:00:01Z", "tick"),
            _doc(1, "2026-01-01T00:00:01.500Z", "other"),
            _doc(1, "2026-01-01T00:00:09Z", "tick"),
        ]
        groups = list(dedupe(docs, window=2.0))
        assert [(g.doc["@timestamp"], sorted(g.ranks)) for g in groups] == [
            ("2026-01-01T00:00:00Z", [0]),
            ("2026-01-01T00:00:01Z", [0]),
            ("2026-01-01T00:00:01.500Z", [1]),
            ("2026-01-01T00:00:09Z", [1]),
        ]


def test_one_line_of_a_traceback() -> None:
    """A multi-line traceback prints as `Type: message`."""
    doc = {"message": "Traceback (most recent call last):\n  File x\nValueError: bad", "error": {"type": "ValueError", "message": "bad"}}
    assert one_line(doc) == "ValueError: bad"
    assert one_line({"message": "a\nb\nc"}) == "a [+2 lines]"


class TestPrinter:
    def _line(self, color: bool | None, tty: bool = False) -> str:
        import io

        from hvdlog.cli.output import Group, Printer

        class Stream(io.StringIO):
            def isatty(self) -> bool:
                return tty

        stream = Stream()
        doc = _doc(3, "2026-01-01T00:00:00.5Z", "boom", level="error", step=7)
        Printer(as_json=False, color=color, stream=stream).event(Group(doc, {3}))
        return stream.getvalue()

    def test_plain_when_not_a_terminal(self) -> None:
        """A pipe gets plain columns: time, rank, level, step, message."""
        assert self._line(None).split() == ["2026-01-01", "00:00:00.500Z", "rank", "3", "ERROR", "step", "7", "boom"]

    def test_colour_on_a_terminal_unless_no_color(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A terminal gets ANSI colour; NO_COLOR turns it off; --color forces it back on."""
        assert "\x1b[" in self._line(None, tty=True)
        monkeypatch.setenv("NO_COLOR", "1")
        assert "\x1b[" not in self._line(None, tty=True)
        assert "\x1b[" in self._line(True)


def test_library_imports_stay_light() -> None:
    """The query library loads neither the Elasticsearch client, click nor rich until a command needs them."""
    import subprocess
    import sys

    code = (
        "import sys, hvdlog.query.es, hvdlog.query.files, hvdlog.analyses.stalls, hvdlog.analyses.stragglers, hvdlog.analyses.failures;"
        "print(sorted(m for m in ('elasticsearch', 'elastic_transport', 'click', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class TestTemplateGroups:
    def test_lines_that_differ_only_in_numbers_collapse_with_their_range(self) -> None:
        """`Timed out waiting 30000ms` ... `31000ms` on ranks 1-7 is one line, the numbers as a range."""
        docs = [_doc(rank, f"2026-01-01T00:00:00.{rank}00Z", f"Timed out waiting {30000 + 1000 * (rank % 2)}ms") for rank in range(1, 8)]
        (group,) = dedupe(docs, window=2.0)
        assert group.ranks == set(range(1, 8))
        assert group.message() == "Timed out waiting <30000..31000>ms"
        stream = io.StringIO()
        Printer(as_json=False, color=False, stream=stream).event(group)
        assert "ranks 1-7" in stream.getvalue() and "Timed out waiting <30000..31000>ms" in stream.getvalue()

    def test_different_words_stay_apart_and_identical_lines_print_as_they_are(self) -> None:
        docs = [_doc(0, "2026-01-01T00:00:00Z", "KeyError: 'a' at 3"), _doc(1, "2026-01-01T00:00:00.1Z", "KeyError: 'b' at 3"),
                _doc(2, "2026-01-01T00:00:00.2Z", "KeyError: 'a' at 3")]
        groups = list(dedupe(docs, window=2.0))
        assert [(sorted(g.ranks), g.message()) for g in groups] == [([0, 2], "KeyError: 'a' at 3"), ([1], "KeyError: 'b' at 3")]
