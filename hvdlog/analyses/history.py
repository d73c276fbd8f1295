"""Across jobs: recurring failures, suspect hosts, and what to do about the newest failure.

Input is one :class:`JobRecord` per job (read from files or aggregated by Elasticsearch,
:mod:`hvdlog.analyses.history_read`); the answers are the same whichever source made them.

* **Recurring failures**: fingerprints (:mod:`hvdlog.analyses.fingerprint`) seen in two jobs
  or more, with their jobs, culprit hosts, and first and last time. A fingerprint seen once is
  a one-off.
* **Suspect hosts**: under "no host is to blame", a failed job's culprit is on host ``h`` with
  probability ``p_j`` = h's share of the job's ranks. A host's count ``k`` of failed jobs it was
  the culprit's host in is then Poisson-binomial; its one-sided p-value is ``P(K >= k)``, exact.
  A host is suspect when ``k >= MIN_COUNT`` and the p-value, Bonferroni-corrected over the
  hosts tested, is at most :data:`ALPHA`; its confidence is ``1 - corrected p``. A failure whose
  fingerprint was also blamed on another host is the code's, not the host's, and is left out
  of the test; one failure alone never reaches the minimum count.
* **Advice** for the newest failed job: ``drain host X`` when its culprit is on a suspect
  host; ``stop`` when its fingerprint failed before and no run got further (the same step or
  earlier); else ``retry`` (a failure not seen before, or one that let the runs progress).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

__all__ = ["ALPHA", "MIN_COUNT", "History", "JobRecord", "analyse", "tail_probability"]

#: Fewest failures a host must be behind before it can be suspect.
MIN_COUNT: Final = 3
#: Largest corrected p-value of a suspect host.
ALPHA: Final = 0.01


@dataclass
class JobRecord:
    """What history needs of one job: its span, where its ranks ran, and its first failure."""

    job: str
    first: str | None = None
    last: str | None = None
    #: host -> how many of the job's ranks ran there.
    hosts: dict[str, int] = field(default_factory=dict)
    last_step: int | None = None
    failed: bool = False
    fingerprint: dict[str, Any] | None = None
    culprit_host: str | None = None
    culprit_rank: int | None = None
    cause: str = ""


@dataclass
class History:
    """The answers, for the text and ``--json``."""

    jobs: int
    failed: int
    recurring: list[dict[str, Any]]
    one_off: list[dict[str, Any]]
    suspect_hosts: list[dict[str, Any]]
    advice: dict[str, Any] | None
    rule: str

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


def tail_probability(probabilities: Sequence[float], k: int) -> float:
    """``P(K >= k)`` for K the number of successes of independent trials with these probabilities (exact, O(n k))."""
    if k <= 0:
        return 1.0
    below = [1.0] + [0.0] * k  # below[i] = P(K = i) for i < k; below[k] = P(K >= k)
    for p in probabilities:
        for i in range(k, 0, -1):
            carried = below[i - 1] * p
            below[i] = below[i] + carried if i == k else below[i] * (1 - p) + carried
        below[0] *= 1 - p
    return min(1.0, max(0.0, below[k]))


def _recurring(failed: list[JobRecord]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    groups: dict[str, list[JobRecord]] = {}
    for record in failed:
        if record.fingerprint is not None:
            groups.setdefault(record.fingerprint["id"], []).append(record)
    recurring: list[dict[str, Any]] = []
    one_off: list[dict[str, Any]] = []
    for records in groups.values():
        records.sort(key=lambda record: record.last or "")
        entry = {
            "fingerprint": records[0].fingerprint,
            "count": len(records),
            "jobs": [record.job for record in records],
            "hosts": sorted({record.culprit_host for record in records if record.culprit_host}),
            "first_seen": min((record.first for record in records if record.first), default=None),
            "last_seen": max((record.last for record in records if record.last), default=None),
        }
        (recurring if len(records) > 1 else one_off).append(entry)
    recurring.sort(key=lambda entry: (-entry["count"], entry["last_seen"] or ""))
    one_off.sort(key=lambda entry: entry["last_seen"] or "")
    return recurring, one_off


def _suspects(failed: list[JobRecord], recurring: list[dict[str, Any]]) -> list[dict[str, Any]]:
    code_bugs = {entry["fingerprint"]["id"] for entry in recurring if len(entry["hosts"]) > 1}
    counted = [record for record in failed if record.culprit_host and record.hosts
               and (record.fingerprint is None or record.fingerprint["id"] not in code_bugs)]
    hosts = sorted({host for record in failed for host in record.hosts})
    tested = []
    for host in hosts:
        present = [record for record in counted if record.hosts.get(host)]
        behind = [record for record in present if record.culprit_host == host]
        if len(behind) < MIN_COUNT:
            continue
        shares = [record.hosts[host] / sum(record.hosts.values()) for record in present]
        tested.append((host, present, behind, shares, tail_probability(shares, len(behind))))
    suspects = []
    for host, present, behind, shares, p_value in tested:
        corrected = min(1.0, p_value * len(tested))
        if corrected > ALPHA:
            continue
        all_failed = [record for record in failed if record.hosts.get(host)]
        suspects.append({
            "host": host,
            "culprit_in": len(behind),
            "failed_jobs_on_host": len(all_failed),
            "tested_jobs": len(present),
            "expected": round(sum(shares), 2),
            "p_value": p_value,
            "corrected_p": corrected,
            "confidence": 1 - corrected,
            "jobs": [record.job for record in behind],
        })
    return sorted(suspects, key=lambda entry: entry["corrected_p"])


def _advice(failed: list[JobRecord], recurring: list[dict[str, Any]], suspects: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not failed:
        return None
    newest = max(failed, key=lambda record: (record.last or "", record.job))
    suspect = next((entry for entry in suspects if entry["host"] == newest.culprit_host), None)
    where = f"job {newest.job}: {newest.cause}" if newest.cause else f"job {newest.job}"
    if suspect is not None:
        return {"job": newest.job, "action": f"drain host {suspect['host']}", "evidence": [
            where,
            (f"host {suspect['host']} was the culprit's host in {suspect['culprit_in']} of {suspect['tested_jobs']} failed jobs "
            f"(expected {suspect['expected']} from its share of ranks; p = {suspect['corrected_p']:.2g}, corrected)"),
        ]}
    mark = newest.fingerprint
    same = [record for record in failed if mark is not None and record.fingerprint is not None
            and record.fingerprint["id"] == mark["id"] and record is not newest]
    if not same:
        return {"job": newest.job, "action": "retry", "evidence": [where, "this failure was not seen in any other job: likely transient"]}
    before = [record.last_step for record in same if record.last_step is not None]
    progressed = newest.last_step is not None and before and newest.last_step > max(before)
    steps = ", ".join(str(record.last_step) for record in [*same, newest])
    if not progressed:
        return {"job": newest.job, "action": "stop", "evidence": [
            where, f"the same failure ({mark['id'] if mark else '-'}) in {len(same) + 1} jobs ({', '.join(r.job for r in same)}, and this one)",
            f"no step progress between them (last steps {steps}): a retry will fail the same way",
        ]}
    return {"job": newest.job, "action": "retry", "evidence": [
        where, f"seen in {len(same)} job(s) before, but this run got further (last steps {steps})",
    ]}


def analyse(records: Sequence[JobRecord]) -> History:
    """History over these jobs."""
    failed = [record for record in records if record.failed]
    recurring, one_off = _recurring(failed)
    suspects = _suspects(failed, recurring)
    rule = (f"a host is suspect when it is the culprit's host in at least {MIN_COUNT} failed jobs and a one-sided "
            f"Poisson-binomial test against its share of ranks gives p <= {ALPHA} after Bonferroni over the hosts tested; "
            "failures whose fingerprint was blamed on several hosts are left out")
    return History(len(records), len(failed), recurring, one_off, suspects, _advice(failed, recurring, suspects), rule)
