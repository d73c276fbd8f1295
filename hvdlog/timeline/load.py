"""Get the timeline analyses a command needs: from explicit files, from the PATHs, from Elasticsearch."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from hvdlog.documents import Document, job_of
from hvdlog.query.spec import Condition
from hvdlog.timeline.analysis import TimelineAnalysis, analyse_files, summarise
from hvdlog.timeline.discover import find_timelines
from hvdlog.timeline_format.documents import records_from_documents

__all__ = ["NEGOTIATIONS", "from_documents", "from_paths"]

#: The stored documents an analysis needs: one per negotiation and one per collective run, whose
#: phases (queue, memcpy, communication) the negotiations do not carry (hvdlog/timeline_format/documents.py).
NEGOTIATIONS = (Condition("event.action", ("negotiation", "operation")),)


def from_documents(docs: Iterable[Document]) -> dict[str | None, TimelineAnalysis]:
    """Analyses by job from stored negotiation documents (Elasticsearch), in time order."""
    by_job: dict[str | None, list[Document]] = {}
    for doc in docs:
        by_job.setdefault(job_of(doc), []).append(doc)
    return {job: summarise(records_from_documents(job_docs)) for job, job_docs in by_job.items()}


def from_paths(
    search_paths: Iterable[str | Path], explicit: Sequence[str | Path] = (), warn: Callable[[str], None] | None = None
) -> dict[str | None, TimelineAnalysis]:
    """Analyses by job: explicit files (key None) plus timelines found under the search paths."""
    groups: dict[str | None, list[Path]] = dict(find_timelines(search_paths))
    if explicit:
        groups[None] = [*groups.get(None, []), *map(Path, explicit)]
    analyses: dict[str | None, TimelineAnalysis] = {}
    for job, files in groups.items():
        try:
            analyses[job] = analyse_files(files)
        except OSError as exc:
            if warn:
                warn(f"timeline {exc.filename}: cannot read ({exc.strerror}); left out")
            continue
        if analyses[job].truncated and warn:
            warn(f"timeline {', '.join(analyses[job].sources)}: ends mid-event (the job died or is still running); read up to the cut")
    return analyses

