"""Failure evidence as the failure model reads it: one :class:`Evidence` per document.

The parse step classified each document (``hvdlog.evidence.kind``/``.rank``/``.source``,
hvdlog/parse/evidence_rules.py, from the message table); documents indexed without those fields
(our own JSON events, older data) are classified here by the same rules. What is left to
read is what the evidence *means* for the rank it is about: a fault that can start a chain,
a consequence of another rank's fault, an expected exit, or the launcher's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from hvdlog.documents import Document, as_int, get_field, timestamp_millis
from hvdlog.fields import level_at_least
from hvdlog.parse.evidence_rules import KIND, RANK, SOURCE, evidence_fields
from hvdlog.parse.messages import signal_names

#: NCCL's WARN line and the ``-> N`` lines that unwind its error (evidence kinds of the message table):
#: a failure only when they end the rank's output (hvdlog.analyses.last_words).
CHAIN_KINDS: Final = frozenset({"nccl_warn", "nccl_unwind"})

__all__ = ["CHAIN_KINDS", "TERMINATION", "UNRECOGNISED", "Evidence", "evidence_of", "per_source"]

#: Signals a rank gets from the launcher (or an operator) when another rank failed.
TERMINATION: Final = frozenset({"SIGTERM", "SIGINT", "SIGHUP", "SIGPIPE"})

#: Kinds the safety net gives (``error``: documents indexed before ``unrecognised`` existed).
UNRECOGNISED: Final = frozenset({"unrecognised", "error"})

#: How a source is named in a reasoning line.
_PER: Final = {
    "rank": "in its own output",
    "horovodrun": "per horovodrun",
    "openmpi_box": "per Open MPI's summary",
    "mpirun_noticed": "per mpirun",
    "srun": "per srun",
    "hydra": "per Hydra (mpiexec)",
    "elastic_driver": "per the elastic driver",
    "hvdlog": "per hvdlog's own events",
}


def per_source(source: str) -> str:
    """``per horovodrun``, ``in its own output``, ... for a reasoning line."""
    return _PER.get(source, f"per {source}")


@cache
def _names() -> dict[str, str]:
    return signal_names()


def _signal_of(doc: Document, kind: str, code: int | None) -> str | None:
    reason = get_field(doc, "event.reason")
    if isinstance(reason, str) and reason.startswith("SIG"):
        return reason
    if code is not None and 128 < code < 160:
        return _names().get(str(code - 128), f"signal {code - 128}")
    message = str(doc.get("message") or "").lower()
    if kind == "signal" and ("out of memory" in message or "oom-kill" in message):
        return "SIGKILL"
    return None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One document read as evidence about a rank (``rank`` None: rank unknown)."""

    kind: str  # an evidence kind ("unrecognised": an error line, or a failure-shaped line, no specific rule classifies)
    source: str
    rank: int | None
    doc: Document
    order: int  # position in the job's time-sorted stream
    millis: int | None
    signal: str | None
    exit_code: int | None
    #: What the rest of the logs make of it, when its kind alone does not say (hvdlog.analyses.last_words):
    #: ``fault`` for a receive timeout no peer's failure explains, or an NCCL chain that ends the rank's output.
    read_as: str | None = None

    @property
    def own(self) -> bool:
        """Printed by the rank itself (not a launcher's word about it)."""
        return self.source == "rank"

    @property
    def recognised(self) -> bool:
        """A specific rule classified it (not only the safety net: a format hvdlog does not know)."""
        return self.kind not in UNRECOGNISED

    @property
    def meaning(self) -> str:
        """``fault`` (can start a chain), ``consequence``, ``expected``, ``verdict`` or ``none``."""
        if self.read_as is not None:
            return self.read_as
        if self.kind in CHAIN_KINDS:
            return "none"  # NCCL may go on after it: a failure only when it ends the rank's output (read_as)
        if self.kind == "expected_exit":
            return "expected"
        if self.kind == "benign":
            return "none"
        if self.kind == "launcher_verdict":
            return "verdict"
        if self.kind in ("peer_loss", "horovod_shutdown") or self.signal in TERMINATION:
            return "consequence"
        if self.kind == "stall_report":
            # Horovod shuts down on it (`Will shutdown`; its E line), else it is a warning the job may outlive.
            severe = level_at_least(str(get_field(self.doc, "log.level") or "info"), "error")
            return "fault" if get_field(self.doc, "horovod.stall.shutdown") is True or severe else "none"
        if self.kind == "exit_status" and self.exit_code == 0:
            return "none"
        return "fault"

    @property
    def strength(self) -> int:
        """3: an exception, a crash or kill signal, a stall shutdown; 2: a bare exit status; 1: an error line."""
        if self.kind in ("exception", "stall_report") or (self.signal is not None and self.signal not in TERMINATION):
            return 3
        if self.kind in ("exit_status", "signal"):
            return 2
        return 1


def _fields(doc: Document) -> tuple[Any, Any, Any]:
    kind = get_field(doc, KIND)
    if kind is None:  # our JSON events and documents indexed before the fields existed
        fields = evidence_fields(doc)
        return fields.get(KIND), fields.get(SOURCE), fields.get(RANK)
    return kind, get_field(doc, SOURCE), get_field(doc, RANK)


def evidence_of(doc: Document, order: int) -> Evidence | None:
    """The evidence ``doc`` is (an error line no rule knows counts as kind ``unrecognised``), or None."""
    kind, source, rank = _fields(doc)
    if kind is None:
        if not level_at_least(str(get_field(doc, "log.level") or "info"), "error"):
            return None
        kind, source, rank = "unrecognised", "rank", doc.get("rank")
    code = as_int(get_field(doc, "process.exit_code"))
    return Evidence(str(kind), str(source or "rank"), as_int(rank), doc, order, timestamp_millis(doc.get("@timestamp")),
                    _signal_of(doc, str(kind), code), code)
