"""Words for the failure model: what a piece of evidence says, in a cause, a reasoning line, a reason."""

from __future__ import annotations

import re
from typing import Final

from hvdlog.analyses.failure_evidence import Evidence
from hvdlog.analyses.summary import one_line
from hvdlog.documents import get_field
from hvdlog.parse.patterns import compile_pattern

__all__ = ["cause_of", "describe", "noun", "reason_of"]

_CHAIN: Final = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)", re.M)
_EXCEPTION_LINE: Final = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)|[\w.]+::\w+): (.+)$", re.M)
#: A Java stack trace inside an exception's message (py4j's Py4JJavaError carries the JVM's): where its frames
#: begin (`\tat pkg.Class.method(File.java:12)`, Java 9's `\tat java.base/pkg.Class.method(...)`, `\t... 12 more`),
#: and its `Caused by: ` lines (the last is the root).
_JAVA_FRAME: Final = re.compile(r"^[ \t]+(?:at [\w$.<>/@-]+\(|\.\.\. \d+ more$)", re.M)
_JAVA_CAUSE: Final = re.compile(r"^Caused by: (.+)$", re.M)
#: The words that make a rank's error a consequence (the table's patterns: one source).
_CONSEQUENCE: Final = (compile_pattern("HVDLOG_EVIDENCE_PEER_LOSS"), compile_pattern("HVDLOG_EVIDENCE_SHUTDOWN"))
_SIGNAL_WORDS: Final = {
    "SIGKILL": "SIGKILL, often the OOM killer",
    "SIGSEGV": "SIGSEGV, a segmentation fault",
    "SIGBUS": "SIGBUS, a bus error",
    "SIGABRT": "SIGABRT, an abort",
    "SIGFPE": "SIGFPE, a floating point exception",
    "SIGILL": "SIGILL, an illegal instruction",
    "SIGTERM": "SIGTERM, terminated",
}
_NOUNS: Final = {
    "exception": "traceback", "signal": "signal", "exit_status": "exit", "peer_loss": "traceback",
    "horovod_shutdown": "traceback", "error": "error", "unrecognised": "error", "expected_exit": "expected exit",
}


def _root_exception(trace: str) -> str | None:
    """The first exception of a chained traceback (the one the others were raised while handling)."""
    if not _CHAIN.search(trace):
        return None
    match = _EXCEPTION_LINE.search(trace)
    return f"{match[1]}: {match[2]}" if match else None


def _java_cause(message: str) -> tuple[str, str | None]:
    """A message that carries a Java stack trace: the text before its frames, and its root cause (the last
    `Caused by:`, Java's own convention), or (message, None) when it carries none."""
    frame = _JAVA_FRAME.search(message)
    if frame is None:
        return message, None
    causes = _JAVA_CAUSE.findall(message)
    return message[: frame.start()], (causes[-1].strip() if causes else None)


def _exception_text(item: Evidence) -> str | None:
    doc = item.doc
    error_type, message = get_field(doc, "error.type"), get_field(doc, "error.message")
    if not error_type:
        return None
    trace = str(get_field(doc, "error.stack_trace") or "")
    # A message that goes on over lines (TensorFlow's node and cause lines) is all of it.
    if (at := trace.rfind(f"{error_type}:")) >= 0 and len(trace) - at > len(f"{error_type}: {message or ''}") + 1:
        message = trace[at + len(error_type) + 1 :]
    message, java_root = _java_cause(str(message or ""))
    text = f"{error_type}: {' '.join(message.split())}".rstrip(": ")
    root = _root_exception(trace)
    if java_root and java_root not in text:
        text = f"{text} (caused by {java_root})"
    return f"{text} (raised while handling {root})" if root and root not in text else text


def cause_of(item: Evidence) -> str:
    """What went wrong, in one line: ``Type: message`` (and a chain's root), or the signal and the line."""
    text = _exception_text(item)
    if text is not None:
        return text
    line = one_line(item.doc)
    return f"{item.signal}: {line}" if item.signal else line


def describe(item: Evidence) -> str:
    """Short words for a reasoning line: ``exit 137 (SIGKILL, often the OOM killer)``, ``ValueError: ...``."""
    signal = _SIGNAL_WORDS.get(item.signal or "", item.signal or "")
    if item.kind == "exit_status" and item.exit_code is not None:
        return f"exit {item.exit_code}" + (f" ({signal})" if signal else "")
    if item.signal is not None:
        return f"killed ({signal})" if item.signal == "SIGKILL" else signal
    text = _exception_text(item) or one_line(item.doc)
    return text if len(text) <= 100 else text[:97] + "..."


def noun(item: Evidence) -> str:
    """What the evidence is, as a noun: ``traceback``, ``signal``, ``exit``."""
    return _NOUNS.get(item.kind, item.kind.replace("_", " "))


def reason_of(item: Evidence, after_culprit: bool) -> str:
    """Why ``item`` is collateral: the words that say so, or the signal or exit after the first failure."""
    message = str(item.doc.get("message") or "")
    for pattern in _CONSEQUENCE:
        if (found := pattern.regex.search(message)) is not None:  # the words, to the end of their line
            words = message[found.start():].split("\n", 1)[0].strip()
            return words if len(words) <= 80 else found.group()
    after = " after the first failure" if after_culprit else ""
    if item.signal is not None:
        return f"{item.signal}{after}"
    if item.exit_code is not None:
        return f"exit code {item.exit_code}{after}"
    return "after the first failure" if after_culprit else "a consequence"
