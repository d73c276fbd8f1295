"""horovod-native.conf's gsub regexes that combine several patterns of the pattern file, as
hvdlog/elastic/logstash_conf.py writes them into the conf: for the harness that runs the conf's
steps and the tests that check them."""

from __future__ import annotations

from typing import Final

from hvdlog.elastic.logstash_conf import collector_prefixes, line_prefix, progress, tags

__all__ = ["COLLECTOR_PREFIXES", "LINE_PREFIX", "PROGRESS", "TAGS"]

LINE_PREFIX: Final = line_prefix()
COLLECTOR_PREFIXES: Final = collector_prefixes()
TAGS: Final = tags()
PROGRESS: Final = progress()
