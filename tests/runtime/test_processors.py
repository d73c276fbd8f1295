"""hvdlog.runtime.renderer: the renderer that turns an event into one ECS JSON line."""

from __future__ import annotations

import re

import orjson

import hvdlog
from hvdlog.fields import FIELDS_BY_NAME
from hvdlog.runtime.clock import UtcClock
from hvdlog.runtime.renderer import EcsJsonRenderer, level_name
from hvdlog.runtime.safe_json import exception_fields
from hvdlog.runtime.secrets import Redactor, secret_values

STATIC = {"host.name": "node1", "process.pid": 42, "job": "j", "event.dataset": "horovod.app", "rank": 3, "local_rank": 1, "size": 8, "local_size": 2}


def render(renderer: EcsJsonRenderer, method: str = "info", **fields: object) -> dict:
    line = renderer(None, method, {"event": "hello", **fields})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    return orjson.loads(line)


class TestEcsJsonRenderer:
    def test_contract_fields_present(self) -> None:
        """Every event carries timestamp, level, message and the static rank fields."""
        doc = render(EcsJsonRenderer(dict(STATIC)))
        assert doc["log.level"] == "info" and doc["message"] == "hello"
        assert {k: doc[k] for k in STATIC} == STATIC
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", doc["@timestamp"])

    def test_every_key_is_declared(self) -> None:
        """Keys outside the contract land under `extra`, never at the top level."""
        doc = render(EcsJsonRenderer(dict(STATIC)), loss=0.5, batch_size=64, weird={"a": 1})
        assert doc["loss"] == 0.5
        assert doc["extra"] == {"batch_size": 64, "weird": {"a": 1}}
        assert set(doc) <= set(FIELDS_BY_NAME)

    def test_step_context(self) -> None:
        """Inside hvdlog.step() events carry step and epoch; outside they do not."""
        renderer = EcsJsonRenderer(dict(STATIC))
        with hvdlog.step(7, epoch=1):
            inside = render(renderer)
        outside = render(renderer)
        assert (inside["step"], inside["epoch"]) == (7, 1)
        assert "step" not in outside

    def test_exception_fields(self) -> None:
        """exc_info=True adds error.type, error.message and the whole stack trace."""
        try:
            raise KeyError("missing")
        except KeyError:
            doc = render(EcsJsonRenderer(dict(STATIC)), "error", exc_info=True)
        assert doc["error.type"] == "KeyError"
        assert doc["error.message"] == "'missing'"
        assert "Traceback (most recent call last)" in doc["error.stack_trace"]
        assert "exc_info" not in doc and "extra" not in doc

    def test_levels(self) -> None:
        """structlog method names and stdlib names map onto the contract's levels."""
        assert [level_name(n) for n in ("exception", "WARNING", "fatal", "msg", "CRITICAL")] == ["error", "warning", "critical", "info", "critical"]

    def test_non_json_values(self) -> None:
        """Values orjson cannot encode (tensors, paths) are rendered, not dropped."""
        import torch

        doc = render(EcsJsonRenderer(dict(STATIC)), loss=torch.tensor(0.25), path=__import__("pathlib").Path("/x"))
        assert doc["loss"] == 0.25 and doc["extra"]["path"] == "/x"

    def test_non_string_keys(self) -> None:
        """A dict with integer keys (a per-rank table, say) is rendered, not refused."""
        doc = render(EcsJsonRenderer(dict(STATIC)), per_rank={0: 1.5, 1: 2.5})
        assert doc["extra"]["per_rank"] == {"0": 1.5, "1": 2.5}

    def test_secrets_are_redacted(self) -> None:
        """A secret env value never appears, even JSON-escaped inside a string."""
        secret = 'p@ss"word\\42'  # noqa: S105 - a made-up secret the test must see redacted
        redactor = Redactor(secret_values({"DB_PASSWORD": secret, "HOME": "/home/someone"}))
        line = EcsJsonRenderer(dict(STATIC), redactor)(None, "info", {"event": f"connect with {secret}", "dsn": secret})
        assert b"word" not in line
        assert orjson.loads(line)["extra"]["dsn"] == "[REDACTED]"


class TestSecretValues:
    def test_only_secret_looking_names(self) -> None:
        """Names with TOKEN/KEY/PASSWORD/SECRET count; short or harmless values do not."""
        env = {"HF_TOKEN": "hf_abcdef123", "AWS_SECRET_ACCESS_KEY": "abcdefgh", "PATH": "/usr/bin:/bin", "MY_KEY": "true", "API_KEY": "abc"}
        assert secret_values(env) == ["hf_abcdef123", "abcdefgh"]


class TestUtcClock:
    def test_monotone_and_padded(self) -> None:
        """Timestamps keep six digits of microseconds and never go backwards within a second."""
        clock = UtcClock()
        stamps = [clock() for _ in range(1000)]
        assert all(len(s) == 27 for s in stamps)
        assert stamps == sorted(stamps)


def test_exception_fields_without_exception() -> None:
    """exc_info=True outside an except block adds nothing."""
    assert exception_fields(True) == {}


class TestBind:
    def test_bound_extras_are_split_once_and_never_mutated(self) -> None:
        """hvdlog.bind() puts contract fields at the top, others under extra; events do not change the binding."""
        renderer = EcsJsonRenderer(dict(STATIC))
        with hvdlog.bind(step=5, run_name="ablation-3"):
            first = render(renderer, lr=0.1, note="x")
            second = render(renderer)
        assert first["step"] == 5 and first["lr"] == 0.1
        assert first["extra"] == {"run_name": "ablation-3", "note": "x"}
        assert second["extra"] == {"run_name": "ablation-3"}


class TestSplicedLine:
    """render() splices pre-rendered static fields; the line must be byte for byte the one
    render_event() gets by serialising the whole event (the timestamps aside)."""

    SECRET = "s3cr3t-value-42"  # noqa: S105 - made up, for the search

    @staticmethod
    def _same(renderer: EcsJsonRenderer, message: object, fields: dict) -> None:
        try:
            raise KeyError("inside")  # so exc_info=True has an exception to render
        except KeyError:
            spliced = renderer.render("warning", message, dict(fields))
            given = dict(fields)  # owned: the renderer may move keys under extra in place
            spliced_owned = renderer.render("warning", message, given, True)
            whole = renderer.render_event("warning", message, dict(fields))
        stamp = re.compile(rb'^\{"@timestamp":"[^"]*"')
        assert stamp.sub(b"", spliced) == stamp.sub(b"", whole), (message, fields)
        assert stamp.sub(b"", spliced_owned) == stamp.sub(b"", whole), (message, fields)

    def test_same_line_as_the_whole_event(self) -> None:
        import base64

        secret = self.SECRET
        fields_cases = [
            {},
            {"loss": 0.5, "lr": 0.1},
            {"loss": 0.5, "batch": 3, "phase": "x", "lr": 1e-05},
            {"exc_info": True, "note": "n"},
            {"per_rank": {0: 1.5}},  # non-str keys: orjson refuses, the general path cleans
            {"big": 1 << 70, "bad": "a\udc80b"},
            {"rank": 9},  # collides with a static field
            {"extra": {"a": 1}, "loss": 1.0},  # an explicit extra
            {"step": 4, "note": "n"},  # overrides the bound step
            {"token": secret, "nested": {"url": f"https://h/?t={secret}"}},
            {"blob": base64.b64encode(f"user:{secret}".encode()).decode()},
            {secret: 1},  # a secret as a key: redacted like a value
        ]
        messages = ["hello", f"uses {secret}", "caf\u00e9 \"q\"", "m" * 300 + secret, 42, "a\udc80"]
        for redactor in (None, Redactor([secret])):
            for static in (dict(STATIC), {**STATIC, "job": secret}, {}):
                renderer = EcsJsonRenderer(static, redactor)
                for context in (None, {"step": 7, "epoch": 1}, {"step": 5, "run_name": "r"}, {"message": "m"}):
                    for message in messages:
                        for fields in fields_cases:
                            if context is None:
                                self._same(renderer, message, fields)
                            else:
                                with hvdlog.bind(**context):
                                    self._same(renderer, message, fields)

    def test_console_sink_gets_what_a_human_line_shows(self) -> None:
        """Rank 0's console sink does not force the general path: the line is the same and the
        sink gets the timestamp, level, message, rank and step the general path gives it."""
        seen: list[dict] = []
        renderer = EcsJsonRenderer(dict(STATIC), console=seen.append)
        shown = ("@timestamp", "log.level", "message", "rank", "step")
        for context in (None, {"step": 7}):
            for fields in ({}, {"loss": 0.5, "note": "n"}, {"step": 4}):
                with hvdlog.bind(**(context or {})):
                    line = renderer.render("warning", "hello", dict(fields))
                    spliced = seen.pop()
                    renderer.render_event("warning", "hello", dict(fields))
                    whole = seen.pop()
                assert orjson.loads(line)["@timestamp"] == spliced["@timestamp"]
                assert {key: spliced.get(key) for key in shown[1:]} == {key: whole.get(key) for key in shown[1:]}, (context, fields)

    def test_static_changes_reach_the_line(self) -> None:
        """update_static() (rank after hvd.init()) re-renders the spliced fields."""
        renderer = EcsJsonRenderer(dict(STATIC))
        renderer.update_static({"rank": 5, "size": 16})
        doc = orjson.loads(renderer.render("info", "x", {}))
        assert (doc["rank"], doc["size"]) == (5, 16)


def test_threads_keep_their_own_step() -> None:
    """The bound context is pre-rendered per binding; threads logging under different steps
    at once never get each other's step (or fields)."""
    import threading

    renderer = EcsJsonRenderer(dict(STATIC), Redactor(["s3cr3t-value-42"]))
    lines: dict[int, list[bytes]] = {}

    def work(number: int) -> None:
        out = lines.setdefault(number, [])
        for step in range(300):
            with hvdlog.step(number * 1000 + step):
                out.append(renderer.render("info", "m", {"loss": 0.5, "worker": number}, True))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for number, rendered in lines.items():
        for step, line in enumerate(rendered):
            doc = orjson.loads(line)
            assert (doc["step"], doc["extra"]) == (number * 1000 + step, {"worker": number}), line


def test_timestamps_cross_second_boundaries() -> None:
    """The spliced timestamp (date part cached per second) matches the clock around second changes."""
    import time
    from datetime import datetime, timezone

    renderer = EcsJsonRenderer(dict(STATIC))
    deadline = time.time() + 2.2
    seen = set()
    while time.time() < deadline:
        before = time.time()
        stamp = orjson.loads(renderer.render("info", "m", {}))["@timestamp"]
        after = time.time()
        parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        assert before - 1e-6 <= parsed <= after + 1e-6, (before, stamp, after)
        seen.add(stamp[:19])
    assert len(seen) >= 2


def test_reserved_fields_are_never_overwritten() -> None:
    """bind() and keywords cannot replace @timestamp, log.level, message, rank, job or
    event.dataset (issue #23): the caller's values are kept, under extra."""
    renderer = EcsJsonRenderer({"rank": 1, "job": "j", "event.dataset": "horovod.app", "host.name": "h"})
    reserved = {"@timestamp": "1999-01-01T00:00:00Z", "log.level": "debug", "rank": 7, "job": "other", "event.dataset": "x.y"}
    for bound, fields in ((reserved, {}), ({}, reserved), ({"message": "bound"}, {"rank": 3})):
        with hvdlog.bind(**bound):
            for line in (renderer.render("error", "real", dict(fields)), renderer.render_event("error", "real", dict(fields))):
                doc = orjson.loads(line)
                assert (doc["log.level"], doc["message"], doc["rank"], doc["job"], doc["event.dataset"]) == ("error", "real", 1, "j", "horovod.app")
                assert not doc["@timestamp"].startswith("1999")
                assert {**bound, **fields}.items() <= doc["extra"].items(), doc
