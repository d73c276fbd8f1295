"""The hang verdict: what kind of hang a stall episode is, who is where, how sure, and what to look at next.

A stall episode (:mod:`hvdlog.analyses.stalls`) says who was missing; at 1,024 ranks an engineer
needs the shape of the hang in one line. The verdict groups the stalled ranks by where they are
stuck (:func:`hvdlog.analyses.stuck_location.stuck_location`) and names one class:

* ``capture_stuck`` — a stalled rank's native log capture was stuck: a print waiting for it is a
  likely cause, whatever else the ranks show;
* ``dead_or_silent`` — ranks of the job sent no stall report while the others waited: dead (a
  failure of their own is recorded: certain) or silent (stopped, killed without a record, its
  watchdog unable to run: likely);
* ``divergence`` — the ranks in the collective wait for different tensors, or a rank in the
  collective never submitted a tensor the others wait for: their code paths diverged;
* ``culprit_outside`` — ranks stuck outside any collective while the others wait in one;
* ``all_wedged`` — every rank waits inside the collective and none is stuck outside it: no
  CPU-side culprit, the network, NCCL/Gloo or a GPU is the suspect (``next_steps`` says what to pull);
* ``unknown`` — the reports do not tell (Horovod's stall inspector alone names missing ranks,
  never where they are).

Confidence as the failure model uses it (docs/failure-model.md): ``certain`` when the recorded
facts leave one reading, ``likely`` when one reading fits them best, ``possible`` when a fact the
class needs is missing (the job size), ``unknown`` when no class fits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final

from hvdlog.analyses.stalls import StallEpisode
from hvdlog.analyses.stuck_location import rank_list

__all__ = ["WEDGED_NEXT_STEPS", "HangVerdict", "hang_verdict", "roll_call"]

#: What to pull when every rank is wedged inside the collective: the evidence is off the CPU.
WEDGED_NEXT_STEPS: Final = (
    "NCCL's own log: rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,COLL,NET) and read its WARN lines",
    "GPU health on every host: nvidia-smi (a GPU at 100 % with no progress), dmesg for Xid errors",
    "the network between the hosts: link errors, a port down, NCCL_IB_* / NCCL_SOCKET_IFNAME settings",
    "the ranks' native stacks: py-spy dump --native --pid PID, or hvdlog snapshot JOB",
)

#: Groups shown on the roll-call line; the rest are counted.
MAX_GROUPS: Final = 6


@dataclass
class HangVerdict:
    """One episode's hang class, roll-call and reasoning (``--json``: :meth:`to_json`)."""

    kind: str
    confidence: str
    reasoning: str
    #: Where the ranks are: ``{"location": ..., "ranks": [...]}``, biggest group first; silent ranks as ``(no report)``.
    groups: list[dict[str, Any]] = field(default_factory=list)
    culprits: list[int] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


def summarize(names: list[str], shown: int = 3) -> str:
    """A few names for one line: ``a, b, c and 5 more``."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _ranks_word(ranks: list[int]) -> str:
    return f"rank {rank_list(ranks)}" if len(ranks) == 1 else f"{len(ranks):,} ranks ({rank_list(ranks)})"


def roll_call(groups: list[dict[str, Any]], limit: int = MAX_GROUPS) -> str:
    """One line of a verdict's (or a snapshot's) groups: ``1,023 ranks (0-16,18-1023) in `X`; rank 17 in `Y```,
    at most ``limit`` groups, biggest first."""
    parts = [f"{_ranks_word(group['ranks'])} in `{group['location']}`" if group["location"] != "(no report)"
             else f"{_ranks_word(group['ranks'])} sent no report" for group in groups[:limit]]
    if len(groups) > limit:
        rest = groups[limit:]
        parts.append(f"{sum(len(g['ranks']) for g in rest):,} more ranks in {len(rest)} other places")
    return "; ".join(parts)


def _silent(episode: StallEpisode) -> list[int]:
    """Ranks of the job that sent no stall report while others waited (only with a known size)."""
    if episode.source != "watchdog" or not episode.size or not episode.waiting_ranks:
        return []
    reporting = {rank for ranks in episode.locations.values() for rank in ranks}
    return [rank for rank in range(episode.size) if rank not in reporting]


def _groups(episode: StallEpisode, silent: list[int]) -> list[dict[str, Any]]:
    groups = [{"location": location, "ranks": ranks} for location, ranks in episode.locations.items()]
    if silent:
        groups.append({"location": "(no report)", "ranks": silent})
    if not groups and episode.missing_ranks:  # the inspector: who is missing, never where
        groups.append({"location": "(missing per Horovod's stall inspector)", "ranks": episode.missing_ranks})
    return sorted(groups, key=lambda group: -len(group["ranks"]))


def hang_verdict(episode: StallEpisode) -> HangVerdict:
    """The hang class of one stall episode, with its roll-call, reasoning and confidence.

    For the job model (``report``, ``watch``): call it on each :class:`StallEpisode` that
    :func:`hvdlog.analyses.stalls.stall_episodes` / ``find_stalls`` returns; it reads only the episode.
    """
    silent = _silent(episode)
    verdict = HangVerdict("unknown", "unknown", "", _groups(episode, silent))
    waiting = set(episode.waiting_ranks)
    outside = [rank for rank in episode.missing_ranks if rank not in silent and rank not in waiting]
    if episode.source != "watchdog":
        verdict.reasoning = (f"Horovod's stall inspector names {_ranks_word(episode.missing_ranks)} missing"
                             if episode.missing_ranks else "the stall reports name no rank")
        verdict.reasoning += "; it never says where a rank is (the watchdog's reports do: configure(stall_after=...))"
        verdict.culprits = list(episode.missing_ranks)
        return verdict
    if episode.capture_stuck_ranks:
        return _capture_stuck(verdict, episode)
    if silent:
        return _dead_or_silent(verdict, episode, silent)
    diverged = [rank for rank in episode.unsubmitted_ranks if rank in waiting]
    if episode.wait_groups or diverged:
        return _divergence(verdict, episode, diverged)
    if outside:
        return _outside(verdict, episode, outside)
    if waiting and not episode.missing_ranks:
        return _wedged(verdict, episode)
    verdict.reasoning = "the stalled ranks' reports fit no class"
    return verdict


def _capture_stuck(verdict: HangVerdict, episode: StallEpisode) -> HangVerdict:
    ranks = episode.capture_stuck_ranks
    verdict.kind, verdict.confidence, verdict.culprits = "capture_stuck", "likely", list(ranks)
    verdict.reasoning = (f"{_ranks_word(ranks)}: the native log capture process was stuck while the rank stalled; "
                         "a print to stdout/stderr blocks until it reads again")
    verdict.next_steps = ["the capture process of that rank (ps: stopped or wedged?), the disk its files go to"]
    return verdict


def _dead_or_silent(verdict: HangVerdict, episode: StallEpisode, silent: list[int]) -> HangVerdict:
    dead = [rank for rank in silent if rank in episode.failed_ranks]
    verdict.kind, verdict.culprits = "dead_or_silent", silent
    waiting = f"{len(episode.waiting_ranks):,} ranks wait in `{', '.join(episode.operations) or 'a collective'}`"
    if dead == silent:
        verdict.confidence = "certain"
        verdict.reasoning = f"{_ranks_word(silent)} sent no stall report and failed (its own error or signal is recorded); {waiting}"
    else:
        verdict.confidence = "likely"
        quiet = [rank for rank in silent if rank not in dead]
        verdict.reasoning = (f"{_ranks_word(quiet)} sent no stall report and no failure of its own while {waiting}: "
                             "dead without a record, stopped (SIGSTOP, a debugger), or its watchdog thread could not run"
                             + (f"; {_ranks_word(dead)} failed" if dead else ""))
        verdict.next_steps = ["whether the process still runs on its host (ps: state T is stopped, D is stuck in the kernel)",
                              "the host's kernel log (dmesg: the OOM killer)"]
    return verdict


def _divergence(verdict: HangVerdict, episode: StallEpisode, diverged: list[int]) -> HangVerdict:
    verdict.kind, verdict.confidence = "divergence", "likely"
    if episode.wait_groups:
        groups = episode.wait_groups  # biggest first: the odd ones out are the culprits, unless no group is biggest
        odd = groups[1:] if len(groups[0]["ranks"]) > len(groups[1]["ranks"]) else groups
        verdict.culprits = sorted(rank for group in odd for rank in group["ranks"])
        described = "; ".join(_waits(group) for group in episode.wait_groups[:3])
        verdict.reasoning = f"the ranks in the collective wait for different tensors: {described}: their code paths diverged"
    else:
        verdict.culprits = diverged
        verdict.reasoning = (f"{_ranks_word(diverged)} waits in a collective but never submitted "
                             f"{summarize(episode.unsubmitted_tensors)}, which the others wait for: their code paths diverged")
    verdict.next_steps = [("the branch that differs between ranks (a rank-dependent condition, a data-dependent layer, "
                           "a different number of batches per rank)")]
    return verdict


def _waits(group: dict[str, Any]) -> str:
    ranks = group["ranks"]
    return f"{_ranks_word(ranks)} {'waits' if len(ranks) == 1 else 'wait'} for {summarize(group['tensors'])}"


def _outside(verdict: HangVerdict, episode: StallEpisode, outside: list[int]) -> HangVerdict:
    verdict.kind, verdict.culprits = "culprit_outside", outside
    where = "; ".join(f"rank {rank_list(group['ranks'])} in `{group['location']}`" for group in verdict.groups
                      if set(group["ranks"]) & set(outside))
    others = (f"every other rank of the {episode.size:,} waits in a collective" if episode.size
              else f"{len(episode.waiting_ranks):,} ranks wait in a collective (job size unknown)")
    verdict.confidence = "certain" if episode.size and len(outside) + len(episode.waiting_ranks) == episode.size else "likely"
    verdict.reasoning = f"stuck outside any collective: {where}; {others}"
    return verdict


def _wedged(verdict: HangVerdict, episode: StallEpisode) -> HangVerdict:
    verdict.kind, verdict.next_steps = "all_wedged", list(WEDGED_NEXT_STEPS)
    operations = ", ".join(f"`{op}`" for op in episode.operations) or "a collective"
    if episode.size and len(episode.waiting_ranks) == episode.size:
        verdict.confidence = "likely"
        verdict.reasoning = (f"all {episode.size:,} ranks wait in {operations} for the same tensors and none is stuck outside it: "
                             "no CPU-side culprit; the network, NCCL/Gloo or a GPU is the suspect")
    else:
        verdict.confidence = "possible"
        verdict.reasoning = (f"{len(episode.waiting_ranks):,} ranks wait in {operations} and none reported being outside it, "
                             "but the job size is unknown: a rank that never reported may be the culprit")
    return verdict
