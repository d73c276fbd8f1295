"""One-line summaries of documents whose message spans lines (tracebacks, stall blocks, boxes)."""

from __future__ import annotations

from hvdlog.documents import Document, get_field

__all__ = ["one_line"]


def one_line(doc: Document) -> str:
    """The message on one line: a traceback shows as ``Type: message``, other extra lines are counted."""
    message = str(doc.get("message") or "")
    error_type = get_field(doc, "error.type")
    lines = message.splitlines() or [""]
    if error_type and (len(lines) > 1 or str(error_type).rsplit(".", 1)[-1] not in message):
        head = lines[0] if len(lines) == 1 else ""
        text = f"{error_type}: {get_field(doc, 'error.message') or ''}"
        return f"{head} [{text}]" if head else text
    if len(lines) == 1:
        return lines[0]
    # a box's rule line (Open MPI's dashes, Hydra's `=`) says nothing: its first line with words does
    head = next((line for line in lines if any(char.isalnum() for char in line)), lines[0])
    return f"{head} [+{len(lines) - 1} lines]"
