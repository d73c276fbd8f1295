"""``hvdlog --help`` lists every command with a summary that does not stop inside an
abbreviation (issue #40: ``run`` read ``Run COMMAND (e.g.``, cut at the abbreviation's dot)."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def test_no_command_summary_stops_at_an_abbreviation() -> None:
    result = subprocess.run([sys.executable, "-m", "hvdlog", "--help"], capture_output=True, text=True, timeout=120, check=False,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    summaries = dict(re.findall(r"^  (\S+)\s+(.+)$", result.stdout.split("Commands:", 1)[1], re.MULTILINE))
    assert summaries.get("run") == "Run COMMAND as one hvdlog job.", summaries
    for name, summary in summaries.items():
        assert not re.search(r"(\be\.g|\bi\.e|\betc|\()\.?(\.\.\.)?$", summary), (name, summary)
