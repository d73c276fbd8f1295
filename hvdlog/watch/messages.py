"""What an alert says outside the watcher: a Slack message and a Kibana Discover link.

Both carry text that came from the logs (a job name, an exception message), so both are
escaped for where they go: Slack's mrkdwn control characters, and KQL's quoted strings, so
that log text can neither ping a channel nor rewrite the link's query.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from datetime import datetime, timedelta
from typing import Any

__all__ = ["discover_link", "kql_quote", "slack_escape", "slack_message"]


def slack_escape(text: object) -> str:
    """Slack's three control characters as entities: ``<!channel>`` and ``<url|label>`` in log text stay text."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def kql_quote(value: object) -> str:
    """A KQL quoted string: ``"`` and ``\\`` escaped, so the value can never close the quote."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _rison(text: str) -> str:
    """A string as Kibana's URL state (rison) writes it: quoted, ``'`` and ``!`` escaped with ``!``."""
    return "'" + text.replace("!", "!!").replace("'", "!'") + "'"


def discover_link(kibana_url: str, alert: dict[str, Any], data_view: str = "hvdlog-logs", minutes: int = 30) -> str:
    """Kibana Discover on the alert's job and ranks, from ``minutes`` before the alert to ``minutes`` after it."""
    parts = urllib.parse.urlsplit(kibana_url)
    if parts.username is not None or parts.password is not None:  # a link is pasted around: never with credentials
        kibana_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, parts.query, parts.fragment))
    clauses = [f"job:{kql_quote(alert['job'])}"] if alert.get("job") else []
    ranks = [rank for rank in alert.get("ranks") or [] if isinstance(rank, int) and not isinstance(rank, bool)]
    if ranks:
        clauses.append("rank:(" + " or ".join(str(rank) for rank in ranks) + ")")
    kql = " and ".join(clauses)
    time_range = f"(time:(from:now-{minutes}m,to:now))"
    if isinstance(alert.get("time"), str):
        with contextlib.suppress(ValueError):
            at = datetime.fromisoformat(alert["time"].replace("Z", "+00:00"))
            span = [(at + timedelta(minutes=sign * minutes)).strftime("%Y-%m-%dT%H:%M:%S.000Z") for sign in (-1, 1)]
            time_range = f"(time:(from:{_rison(span[0])},to:{_rison(span[1])}))"
    state = f"(dataSource:(dataViewId:{_rison(data_view)},type:dataView),query:(language:kuery,query:{_rison(kql)}))"
    safe = "():,!'"
    return f"{kibana_url.rstrip('/')}/app/discover#/?_g={urllib.parse.quote(time_range, safe=safe)}&_a={urllib.parse.quote(state, safe=safe)}"


def slack_message(alert: dict[str, Any]) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook body: one ``text`` in Slack's mrkdwn, log text escaped."""
    marks = {"firing": ":rotating_light:", "update": ":warning:", "resolved": ":white_check_mark:"}
    status, kind = alert.get("status"), alert.get("kind")
    lines = [f"{marks.get(str(status), ':information_source:')} *{slack_escape(kind)}* ({slack_escape(status)}) {slack_escape(alert.get('summary', ''))}"]
    if alert.get("reasoning"):
        confidence = f" ({slack_escape(alert['confidence'])})" if alert.get("confidence") else ""
        lines.append(f"_why_: {slack_escape(alert['reasoning'])}{confidence}")
    if isinstance(alert.get("kibana_url"), str):
        link = alert["kibana_url"].replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")  # our own link: it cannot end the <…|…>
        lines.append(f"<{link}|Open in Kibana Discover>")
    return {"text": "\n".join(lines)}
