"""A failure's fingerprint: what makes two jobs' first failures "the same failure".

Three parts, none of which changes between runs of the same bug: the error type, the
canonical message (its template: numbers, paths, hosts, ranks replaced,
:mod:`hvdlog.analyses.templates`) and the top user frame of the traceback (file name and
function, no line number: an edit above the bug moves it). Its ``id`` is a short hash of the
three, the same in every process, over files and Elasticsearch. A stall shutdown's type is
``stall``; a failure with no error of its own (only a launcher's word, or silent ranks) has no
type, and its message is the template of the cause hvdlog wrote.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from hvdlog.analyses.templates import fingerprint_id, template

if TYPE_CHECKING:
    from hvdlog.analyses.failures import FailureReport

__all__ = ["describe_fingerprint", "fingerprint_of", "top_user_frame"]

_FRAME: Final = re.compile(r'File "(?P<file>[^"]+)", line \d+, in (?P<function>[^\s]+)')
#: Frames in these are the libraries', not the user's.
_LIBRARY: Final = re.compile(r"(?:site-packages|dist-packages|/lib/python\d[\d.]*/|^<frozen |^<string>)")


def top_user_frame(stack_trace: object) -> str | None:
    """``train.py:main``: the innermost frame of the traceback outside the libraries, or None."""
    frames = [match for match in _FRAME.finditer(str(stack_trace or "")) if not _LIBRARY.search(match["file"])]
    if not frames:
        return None
    last = frames[-1]
    return f"{last['file'].replace(chr(92), '/').rsplit('/', 1)[-1]}:{last['function']}"


def fingerprint_of(report: FailureReport) -> dict[str, Any] | None:
    """The fingerprint of a first-failure report: ``id``, ``error_type``, ``message``, ``frame``; None when nothing failed."""
    if report.stall is not None:
        error_type: str | None = "stall"
        message = template(report.cause)
    elif report.error_type or report.error_message:
        error_type = str(report.error_type) if report.error_type else None
        message = template(report.error_message)
    elif report.culprit is not None:
        error_type = None
        message = template(report.culprit.get("message"))
    elif report.cause:
        error_type = None
        message = template(report.cause)
    else:
        return None
    frame = top_user_frame(report.stack_trace)
    return {"id": fingerprint_id(error_type, message, frame), "error_type": error_type, "message": message, "frame": frame}


def describe_fingerprint(mark: dict[str, Any]) -> str:
    """``KeyError: 'lr_decay' (in train.py:main)``: a fingerprint on one line."""
    text = f"{mark['error_type']}: {mark['message']}" if mark.get("error_type") else str(mark.get("message"))
    return text + (f" (in {mark['frame']})" if mark.get("frame") else "")
