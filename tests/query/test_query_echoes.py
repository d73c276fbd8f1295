"""drop_echoes: the native traceback that repeats hvdlog's uncaught_exception event is left out, nothing else."""

from __future__ import annotations

from typing import Any

from hvdlog.query.echoes import drop_echoes


def _time(second: int | None) -> str | None:
    return None if second is None else f"2026-11-30T10:00:{second:02d}.000000Z"


def _event(second: int | None, rank: int = 1, message: str = "NaN loss") -> dict[str, Any]:
    return {"@timestamp": _time(second), "rank": rank, "job": "j", "message": "event",
            "event": {"dataset": "horovod.app", "action": "uncaught_exception"},
            "error": {"type": "ValueError", "message": message}}


def _native(second: int | None, rank: int = 1, message: str = "NaN loss") -> dict[str, Any]:
    return {"@timestamp": _time(second), "rank": rank, "job": "j", "message": "native",
            "event": {"dataset": "horovod.launcher"}, "error": {"type": "builtins.ValueError", "message": message}}


def _line(second: int | None, text: str) -> dict[str, Any]:
    return {"@timestamp": _time(second), "rank": 0, "job": "j", "message": text}


def _messages(docs: list[dict[str, Any]]) -> list[str]:
    return [doc["message"] for doc in drop_echoes(docs)]


def test_native_before_its_event_is_dropped_order_kept() -> None:
    assert _messages([_line(0, "a"), _native(1), _line(1, "b"), _event(2), _line(3, "c")]) == ["a", "b", "event", "c"]


def test_native_after_its_event_is_dropped() -> None:
    assert _messages([_line(0, "a"), _event(1), _line(1, "b"), _native(2), _line(3, "c")]) == ["a", "event", "b", "c"]


def test_untimed_native_waits_for_its_event() -> None:
    """A capture without arrival times (older hvdlog) sorts first; it is still matched to the event."""
    assert _messages([_native(None), _line(1, "b"), _event(40), _line(41, "c")]) == ["b", "event", "c"]


def test_other_exceptions_stay() -> None:
    """Another rank, another message, or an event too far away in time: not an echo."""
    assert _messages([_native(1, rank=0), _event(2)]) == ["native", "event"]
    assert _messages([_native(1, message="other"), _event(2)]) == ["native", "event"]
    assert _messages([_native(1), _line(30, "b"), _event(40)]) == ["native", "b", "event"]


def test_two_events_are_not_echoes_of_each_other() -> None:
    """Only captured native output is dropped, never one of our events."""
    assert _messages([_event(1), _event(2)]) == ["event", "event"]


def _unranked(doc: dict[str, Any], pid: int = 30191, host: str = "vm") -> dict[str, Any]:
    """``doc`` as a rank-unknown process's (``rank-unknown-pidP.*``): no rank, its host and pid."""
    del doc["rank"]
    return {**doc, "host": {"name": host}, "process": {"pid": pid}}


def test_a_rank_unknown_process_echo_is_dropped() -> None:
    """A process without a rank: its native traceback repeats its event (same host and pid) and goes."""
    assert _messages([_unranked(_native(1)), _unranked(_event(1)), _line(2, "b")]) == ["event", "b"]


def test_another_rank_unknown_process_keeps_its_traceback() -> None:
    """Another pid or host, or no pid at all: not the same process, nothing is dropped."""
    assert _messages([_unranked(_native(1), pid=7), _unranked(_event(1))]) == ["native", "event"]
    assert _messages([_unranked(_native(1), host="other"), _unranked(_event(1))]) == ["native", "event"]
    no_pid = _unranked(_native(1))
    del no_pid["process"]
    assert _messages([no_pid, _unranked(_event(1))]) == ["native", "event"]
