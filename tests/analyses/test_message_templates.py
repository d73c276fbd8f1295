"""Templates: lines that differ only in numbers, addresses, paths or hosts share one; others stay apart."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from hvdlog.analyses.templates import canonical, fingerprint_id, template


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Timed out waiting 30000ms for rank 3", "Timed out waiting 31000ms for rank 7"),
        ("[2026-11-29 16:01:09.647905: D /tmp/tmp.1ngyb/horovod/common/operations.cc:906] done",
         "[2025-01-02 03:04:05.000001: D /opt/build/horovod/common/operations.cc:12] done"),
        ("Performing allreduce.noname.123 at 0x7f3a2b", "Performing allreduce.noname.9 at 0xdeadbeef"),
        ("Connection closed by peer [10.0.0.3]:45012", "Connection closed by peer [192.168.1.200]:5"),
        ("connect to node3.cluster.local failed", "connect to gpu-17.cluster.local failed"),
        ("loss -1.5e-3 after 12 steps", "loss 0.25 after 1 steps"),
    ],
)
def test_lines_that_differ_only_in_values_share_a_template(one: str, other: str) -> None:
    assert template(one) == template(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("KeyError: 'lr_decay'", "KeyError: 'batch_size'"),
        ("CUDA out of memory. Tried to allocate 2.00 GiB", "CUDA error: an illegal memory access was encountered"),
        ("Horovod has been shut down", "Horovod has been shut down by rank 1"),
    ],
)
def test_different_failures_stay_apart(one: str, other: str) -> None:
    assert template(one) != template(other)


def test_values_are_kept_in_order_and_known_hosts_become_host() -> None:
    found = canonical("rank 3 on gpu-b waited 2.5 s for gpu-a", frozenset({"gpu-a", "gpu-b"}))
    assert found.text == "rank <N> on <HOST> waited <N> s for <HOST>"
    assert found.values == (("N", "3"), ("HOST", "gpu-b"), ("N", "2.5"), ("HOST", "gpu-a"))
    assert template("step-5 of resnet50") == "step-<N> of resnet<N>"  # a hyphen after a word is no sign


def test_every_digit_changed_keeps_the_template_on_random_lines() -> None:
    rng = random.Random(3)
    words = ["rank", "step", "2026-11-29T10:00:00.123Z", "/data/x/y.py", "10.1.2.3", "0x1f", "tensor.7", "(43%)", "12:01:02", "loss=0.5"]
    for _ in range(300):
        line = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        changed = re.sub(r"[1-9]", lambda m: str(rng.randint(1, 9)), line)
        assert template(line) == template(changed), line


def test_fingerprint_ids_are_stable_across_processes() -> None:
    code = "from hvdlog.analyses.templates import fingerprint_id; print(fingerprint_id('KeyError', 'x <N>', 'train.py:main'))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == fingerprint_id("KeyError", "x <N>", "train.py:main")
    assert fingerprint_id("KeyError", "x <N>", None) != fingerprint_id("KeyError", "x <N>", "train.py:main")
