"""Native output of a rank (Horovod C++ core lines, stall warnings, tracebacks, prints)
-> documents of the field contract.

Lines arrive one at a time, possibly from several ranks interleaved (a horovodrun console
capture); multi-line events (stall warnings, Python tracebacks, C++ ``terminate``) are
assembled per (rank, stream, file), so interleaving does not tear them apart. A line that
no pattern recognises is kept, raw, with the parse-failure tag: nothing is dropped except
blank lines outside multi-line events and, when asked, known TRACE/DEBUG chatter.

Datasets: core lines and stall warnings -> ``horovod.core``; everything else
(tracebacks, prints, launcher lines) -> ``horovod.launcher``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from hvdlog.documents import Document
from hvdlog.fields import CORE_DATASET, LAUNCHER_DATASET, PARSE_FAILURE_TAG
from hvdlog.parse.blocks import Opener, bound, grammar
from hvdlog.parse.evidence_rules import classify
from hvdlog.parse.jsonl import nest
from hvdlog.parse.line_times import LineTimes
from hvdlog.parse.messages import box_fields, level_words, recognise, signal_names
from hvdlog.parse.patterns import CompiledPattern, compile_pattern
from hvdlog.parse.stalls import StallBlock, is_cut_header, stall_header_seconds, stall_op_fields
from hvdlog.parse.timestamps import TimeConverter

__all__ = ["CORE_DATASET", "LAUNCHER_DATASET", "Chatter", "NativeParser", "parse_chatter"]


_CORE: Final = compile_pattern("HOROVOD_CORE_LINE")
_CORE_REGEX: Final = _CORE.regex
_CORE_GROUPS: Final = {capture.field: capture.group for capture in _CORE.captures}
_G_TIME, _G_LEVEL, _G_FILE, _G_LINE, _G_RANK, _G_MESSAGE = (
    _CORE_GROUPS[name]
    for name in ("@metadata.hvd.time", "@metadata.hvd.level", "log.origin.file.name", "log.origin.file.line", "rank", "message")
)
_LEGACY_WARNING: Final = compile_pattern("HOROVOD_STALL_LEGACY_LINE")
_OPS_LINE: Final = compile_pattern("HOROVOD_STALL_OPS_LINE").regex
_EXCEPTION: Final = compile_pattern("HOROVOD_EXCEPTION_LINE")
_LEGACY_STALL_MARK: Final = "WARNING: One or more tensors"
#: signal numbers -> names: the message table's, for mpirun's `exited on signal N` (one source)
_SIGNALS: Final = signal_names()
_CHATTER: Final = compile_pattern("HOROVOD_CHATTER").regex
_SIZE: Final = compile_pattern("HOROVOD_JOB_SIZE")
_LAUNCH_SIZE: Final = compile_pattern("HOROVOD_LAUNCH_SIZE")
_BROKEN: Final = compile_pattern("HOROVOD_BROKEN_LINE").regex
#: Horovod's level letters -> log.level: the message table's one map of level words
_LEVELS: Final = level_words()
_GRAMMAR: Final = grammar()
#: The states of an Open MPI box (blocks.json `openmpi_box`): open, and closed by its second rule line.
_BOX_STATES: Final = frozenset({"box", "box_closed"})
_QUIET_LETTERS: Final = frozenset("TD")
_NOTHING: Final[list[Document]] = []  # returned by feed() when a line completes nothing; never mutated

#: "keep" every chatter line, "drop" them all, or keep one in N (an int >= 1).
Chatter = str | int


def parse_chatter(value: str | int) -> Chatter:
    """Check a chatter setting once: ``keep``, ``drop``, ``sample=N`` / N (keep 1 in N)."""
    if value in ("keep", "drop"):
        return value
    text = str(value).removeprefix("sample=")
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f"chatter must be keep, drop or sample=N with N >= 1, not {value!r}")


class _Stream:
    """What one (rank, stream, file) has open: a multi-line event and its last time."""

    __slots__ = ("base", "chatter_seen", "fields", "kind", "last_time", "lines", "message_from", "now", "order", "pending", "stall", "started", "torn")

    def __init__(self, base: dict[str, Any]) -> None:
        self.base = base
        self.kind: str | None = None  # None, "stall", "traceback", "after_exception", "chain", "terminate", "code" (an indented line waiting for a frame)
        self.lines: list[str] = []
        self.stall: StallBlock | None = None
        self.fields: dict[str, Any] = {}
        self.last_time: str | None = None  # the last time a line of the stream had (refines a launcher's whole second)
        self.now: str | None = None  # the time of the line being read, its own: None when it has none
        self.started: str | None = None  # the time of the line that began the open event
        self.pending: list[str] = []
        self.chatter_seen = 0
        self.message_from = 0  # index in lines after the exception line: its message goes on there
        self.order = 0  # when the open event began, among all streams (close() emits in that order)
        self.torn: str | None = None  # a core header whose line another thread's line cut off (see _torn)


class NativeParser:
    """Feeds native lines, yields documents; call :meth:`close` at the end of input."""

    __slots__ = ("_chatter", "_held", "_last_context", "_last_stream", "_line_times", "_opened", "_streams", "_times", "size")

    def __init__(self, *, timezone: str | None = None, chatter: Chatter = "keep", size: int | None = None) -> None:
        """``timezone`` of the nodes' clocks; ``chatter`` see :func:`parse_chatter`;
        ``size`` of the job, for the oldest stall format (else learned from the core log)."""
        self._times = TimeConverter(timezone)
        self._line_times = LineTimes(self._times)
        self._chatter = parse_chatter(chatter)
        self.size = size
        self._streams: dict[tuple[Any, ...], _Stream] = {}
        self._last_context: dict[str, Any] | None = None
        self._last_stream: _Stream | None = None
        self._opened = 0  # multi-line events begun so far
        self._held: _Stream | None = None  # the stream holding an indented line for one line

    # --- input -------------------------------------------------------------------------
    def feed(self, payload: str, context: dict[str, Any], arrival: str | None = None) -> list[Document]:
        """One line without its launcher tag; ``context`` = flat fields from tag and path;
        ``arrival`` = the tee's UTC arrival time of the line (hvdlog.parse.arrival), if any.
        Returns the documents completed by this line (usually one, or none)."""
        last_stream = self._last_stream
        if last_stream is not None and context is self._last_context:  # untagged lines of one file share one context
            stream = last_stream
        else:
            key = (context.get("rank"), context.get("horovod.launcher.stream"), context.get("log.file.path"))
            known = self._streams.get(key)
            if known is None:
                known = self._streams[key] = _Stream(dict(context))
            stream = known
            self._last_context, self._last_stream = context, stream
            ended = self._sibling_stall(key)
            if ended is not None:
                return [self._flush(ended), *self._feed_timed(stream, payload, context, arrival)]
        return self._feed_timed(stream, payload, context, arrival)

    def _feed_timed(self, stream: _Stream, payload: str, context: dict[str, Any], arrival: str | None) -> list[Document]:
        """:meth:`feed` once the line's stream is known: its times, then the line."""
        # A line's time is its own or none (never the line before's): the launcher's tag time, the
        # tee's arrival time, or (read later) a logger's stamp in the line itself.
        stream.now = None
        launcher_time = context.get("@metadata.hvd.launcher_time")
        if launcher_time is not None:
            # the launcher's time has whole seconds: keep a core time of the same second
            converted = self._times.launcher(launcher_time)
            if converted is not None:
                if (stream.last_time or "")[:19] != converted[:19]:
                    stream.last_time = converted
                stream.now = stream.last_time
        if arrival is not None:  # exact and in UTC
            stream.last_time = stream.now = arrival
        held = self._held
        if held is not None and held is not stream:
            # An indented line waits for its own stream's next line only while nothing else is
            # read: another stream's line releases it first, so documents keep their read order.
            return [self._flush(held), *self._feed_stream(stream, payload)]
        return self._feed_stream(stream, payload)

    def _sibling_stall(self, key: tuple[Any, ...]) -> _Stream | None:
        """A stall report still open on the other stream of the same process (rank and file) as
        ``key``'s line. Horovod writes a report at once, and while its rank waits for the
        stalled tensors its training thread prints nothing: a line of the same process on
        another stream comes after the report, so the report ends there and its document keeps
        its place in read order (the only order an untimed report has)."""
        rank, name, path = key
        if not isinstance(rank, int) or name is None:
            return None
        for other in ("stderr", "stdout"):
            sibling = self._streams.get((rank, other, path)) if other != name else None
            if sibling is not None and sibling.kind == "stall":
                return sibling
        return None

    def _feed_stream(self, stream: _Stream, payload: str) -> list[Document]:
        """``payload`` into its own stream: continue the open event, or close it and begin."""
        if payload[:1] == "[" or stream.torn is not None:
            rejoined = stream.torn is not None
            payload = _torn(stream, payload)
            if rejoined and stream.torn is None and stream.kind is not None:
                # the torn line's rest while the inner line's block (a stall report) is open: the
                # other thread's line, a document of its own; the block goes on
                core = _CORE_REGEX.match(payload)
                if core is not None and not core[_G_MESSAGE].startswith("One or m"):
                    doc = self._core(stream, core)
                    return _NOTHING if doc is None else [doc]
        if stream.kind is None:
            doc = self._begin(stream, payload)
            return _NOTHING if doc is None else [doc]
        if self._continue(stream, payload):
            return _NOTHING
        docs = [self._flush(stream)]
        doc = self._begin(stream, payload)
        if doc is not None:
            docs.append(doc)
        return docs

    def _begin(self, stream: _Stream, payload: str) -> Document | None:
        """:meth:`_start`, noting when a multi-line event begins."""
        doc = self._start(stream, payload)
        if stream.kind is not None:
            self._opened += 1
            stream.order = self._opened
        return doc

    def close(self) -> Iterator[Document]:
        """Emit the multi-line events still open (input ended in the middle of one), in the
        order they began (untimed documents keep their read order)."""
        for stream in sorted(self._streams.values(), key=lambda stream: stream.order):
            if stream.kind is not None:
                yield self._flush(stream)

    # --- multi-line events: the grammar of hvdlog/parse/assets/blocks.json ----------------
    def _continue(self, stream: _Stream, line: str) -> bool:
        """True when ``line`` belongs to the open event (and was added to it)."""
        kind = stream.kind
        if kind == "code":  # the held line gets its answer now
            self._held = None
        rule = _GRAMMAR.step(kind, line, stream.lines[-1] if stream.lines else "", bool(stream.pending))  # type: ignore[arg-type]
        if rule is None:
            return False
        if rule.then == "hold":  # a blank line: part of the event only if it goes on
            stream.pending.append(line)
            return True
        if rule.action == "stall":
            stream.stall.add(line)  # type: ignore[union-attr]
        else:
            self._append(stream, line)
            if rule.action is not None:
                self._act(stream, rule.action, rule.pattern, line)
        stream.kind = rule.then
        return True

    @staticmethod
    def _act(stream: _Stream, action: str, pattern: CompiledPattern | None, line: str) -> None:
        """What a rule's ``action`` does with the line just added."""
        if action == "exception":  # the exception line: its type and message
            stream.fields = _EXCEPTION.match(line) or {"error.message": line}
            stream.message_from = len(stream.lines)
            return
        captured = pattern.match(line) if pattern is not None else None
        if captured is None:
            return
        number = captured.pop("@metadata.hvd.signal_number", None)
        stream.fields.update(captured)
        if action == "hydra_end" and str(number) in _SIGNALS:
            stream.fields["event.reason"] = _SIGNALS[str(number)]

    @staticmethod
    def _append(stream: _Stream, line: str) -> None:
        """Add ``line`` to the open event, with the blank lines held before it."""
        stream.lines.extend(stream.pending)
        stream.pending.clear()
        stream.lines.append(line)

    def _flush(self, stream: _Stream) -> Document:
        kind = stream.kind
        if kind == "code" or (kind in _BOX_STATES and len(stream.lines) == 1):
            # no frame followed, or a rule line is alone (no box): the line, as _start reads it, at its own time
            if kind == "code":
                self._held = None
            line = stream.lines[0]
            stream.kind, stream.lines = None, []
            return self._single(stream, line, stream.started)
        fields = stream.fields
        if kind in _BOX_STATES:  # Open MPI's help box: the fields its most severe line has, the whole box its message
            fields.update(box_fields(stream.lines, stream.base))
        elif kind == "stall":
            fields.update(stream.stall.fields(self.size))  # type: ignore[union-attr]
        else:
            fields["message"] = "\n".join(stream.lines)
            fields["event.dataset"] = LAUNCHER_DATASET
            if kind == "hydra":  # Hydra's box: a rank ended by a signal or an exit code
                fields["log.level"] = "error"
            elif kind == "terminate":
                fields["log.level"] = "critical"
            else:
                fields["log.level"] = "error"
                fields["error.stack_trace"] = fields["message"]
                more = stream.lines[stream.message_from:] if kind in ("after_exception", "call_stack", "chain") else []
                if more and "error.message" in fields:  # TF & co.: the message goes on after the line
                    fields["error.message"] = "\n".join([fields["error.message"], *more])
            _GRAMMAR.classified(kind or "", fields)  # blocks.json `classify`: e.g. a scale-down's terminate
        doc = self._document(stream, fields, stream.started)
        stream.kind = None
        stream.stall = None
        stream.lines = []
        stream.fields = {}
        # blank lines that followed a finished traceback carry nothing: not documents
        stream.pending.clear()
        return doc

    # --- single lines and event starts -------------------------------------------------
    def _start(self, stream: _Stream, line: str) -> Document | None:
        """A core line, the opening of a block (blocks.json ``opens``), or a line of its own."""
        if line.startswith("["):
            core = _CORE_REGEX.match(line)
            if core is not None:
                return self._core(stream, core)
        if not line.strip():
            return None
        own = self._line_times.own(stream.base.get("log.file.path"), line)  # a logger's stamp (TF, glog, loguru, MXNet)
        if own is not None:
            stream.now = stream.last_time = own
        opener = _GRAMMAR.opener(line)
        if opener is None or opener.state == "code":
            headless = _headless_stall(line, self.size)  # a stall report's tensor line whose header was lost
            if headless is not None:
                return self._document(stream, headless, stream.now)
        if opener is None or not self._open(stream, opener, line):
            return self._single(stream, line, stream.now)
        stream.kind, stream.started = opener.state, stream.now
        if opener.state == "code":  # a frame's code line whose `File` line was cut off? The next line says.
            self._held = stream
        return None

    def _open(self, stream: _Stream, opener: Opener, line: str) -> bool:
        """Begin ``opener``'s block with ``line``; False when the line turns out not to open it."""
        if opener.action == "legacy_stall":
            # <= v0.16's bare `WARNING: ` header, also with a leading space or glued to a
            # progress bar's last output (no newline before it); the line is kept whole.
            legacy = _LEGACY_WARNING.match(line[line.index(_LEGACY_STALL_MARK):])
            seconds = stall_header_seconds(legacy["message"]) if legacy else None
            if seconds is None:
                return False
            stream.stall = StallBlock(line, seconds)
            stream.fields = {"log.level": "warning", "event.dataset": CORE_DATASET}
            return True
        if opener.action == "headless_stall":
            # `Missing ranks:` (`Stalled ranks:`, `Stalled ops:`) whose header line was lost (a
            # capture or scrollback that starts in it): the lines after it still name the ranks
            stream.stall = StallBlock(line, None)
            stream.fields = {"log.level": "warning", "event.dataset": CORE_DATASET}
            return True
        stream.lines = [line]
        if opener.action == "exception":  # an exception line alone: its frames were lost
            stream.fields = _EXCEPTION.match(line) or {"error.message": line}
            stream.message_from = 1
        elif opener.action == "capture":
            stream.fields = opener.pattern.match(line) or {}  # type: ignore[union-attr]
        return True

    def _single(self, stream: _Stream, line: str, time: str | None) -> Document:
        """A line that is a document of its own: a known message, or kept raw and tagged."""
        known = recognise(line, stream.base)  # the message table (hvdlog/parse/assets/messages.json)
        if known is not None:
            return self._document(stream, known, time)
        if self.size is None and "-n" in line:
            self.size = _launch_size(line)
        fields: dict[str, Any] = {"message": line, "log.level": "info", "event.dataset": LAUNCHER_DATASET}
        if _BROKEN.search(line) is not None:  # a print is no parse failure; a torn or garbled line is
            fields["tags"] = [PARSE_FAILURE_TAG]
        return self._document(stream, fields, time)

    def _core(self, stream: _Stream, core: Any) -> Document | None:
        letter = core[_G_LEVEL]
        message = core[_G_MESSAGE]
        time = core[_G_TIME]
        if time is not None:
            converted = self._times.core(time)
            if converted is not None:
                stream.now = stream.last_time = converted
                self._line_times.note(stream.base.get("log.file.path"), time)
        fields: dict[str, Any] = {
            "message": message,
            "log.level": _LEVELS[letter],
            "log.origin.file.name": core[_G_FILE],
            "log.origin.file.line": int(core[_G_LINE]),
            "event.dataset": CORE_DATASET,
        }
        if core[_G_RANK] is not None:
            fields["rank"] = int(core[_G_RANK])
        if letter in _QUIET_LETTERS:
            if _CHATTER.match(message):
                if self._chatter == "drop":
                    return None
                if self._chatter != "keep":
                    stream.chatter_seen += 1
                    if (stream.chatter_seen - 1) % self._chatter:  # type: ignore[operator]
                        return None
            elif message.startswith("Started Horovod"):
                size = _SIZE.match(message)
                if size is not None:
                    self.size = size["size"]
        elif message.startswith("One or m"):
            seconds = stall_header_seconds(message)
            if seconds is not None or is_cut_header(message):
                stream.kind, stream.stall, stream.fields = "stall", StallBlock(message, seconds), fields
                stream.started = stream.now
                return None
        elif _OPS_LINE.match(message):  # <= v0.16: one W line per stalled tensor
            fields.update(stall_op_fields(message, self.size))
            fields.update({"event.action": "stall", "horovod.stall.source": "inspector", "horovod.stall.shutdown": False})
        return self._document(stream, fields, stream.now)

    @staticmethod
    def _document(stream: _Stream, fields: dict[str, Any], time: str | None) -> Document:
        """``fields`` on the stream's base, at ``time`` (None: the document has no time)."""
        flat = {**stream.base, **fields}
        if time is not None:
            flat["@timestamp"] = time
        flat.pop("@metadata.hvd.launcher_time", None)
        bound(flat)  # a document's texts have a byte cap (hvdlog/parse/assets/blocks.json)
        return nest(classify(flat))  # failure evidence: the message table's evidence rules


# --- line repairs (small and separate: the block grammar around them is data elsewhere) ------


def _torn(stream: _Stream, payload: str) -> str:
    """Rejoin a core line another thread wrote into: Horovod's two threads share stderr, so
    ``[..: I operations.cc:689] [..: D operations.cc:906] Background thread init done`` is
    the second thread's whole line behind the first's header, and the first's rest
    (``[1]: Horovod initialized``) comes on the next line. The outer header is kept aside
    and put before the stream's next headless line; the inner line is read as it is."""
    if stream.torn is not None and _CORE_REGEX.match(payload) is None:
        payload, stream.torn = stream.torn + payload, None
        return payload
    core = _CORE_REGEX.match(payload)
    if core is None or core[_G_RANK] is not None or not core[_G_MESSAGE].startswith("["):
        return payload
    if _CORE_REGEX.match(core[_G_MESSAGE]) is None:
        return payload
    stream.torn = payload[: core.start(_G_MESSAGE)]
    return core[_G_MESSAGE]


def _headless_stall(line: str, size: int | None) -> dict[str, Any] | None:
    """A stall report's per-tensor line whose header was lost (scrollback, a cut capture,
    another rank's output between): ``<tensor> [missing ranks: 0, 1, 3]`` alone is still
    a stall report of those ranks."""
    if "ranks: " not in line or _OPS_LINE.match(line.lstrip(" ")) is None:
        return None
    fields = stall_op_fields(line.strip(), size)
    fields.update({"message": line.strip(), "log.level": "warning", "event.dataset": CORE_DATASET,
                   "event.action": "stall", "horovod.stall.source": "inspector", "horovod.stall.shutdown": False})
    return fields


def _launch_size(line: str) -> int | None:
    """The job size a launcher's command line gives (``mpirun -np 4 ...``), if ``line`` is one."""
    found = _LAUNCH_SIZE.search(line)
    return None if found is None else int(found["size"])
