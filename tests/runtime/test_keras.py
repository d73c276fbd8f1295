"""hvdlog.keras with a real Keras 3 on the torch backend (issue 22): a real fit, real files."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="Keras 3 (pip install keras, hvdlog[keras]) is needed")

SCRIPT = """
import sys, numpy as np, keras, hvdlog
hvdlog.configure(root=sys.argv[1], job="k", stall_after=None)
import hvdlog.keras
log = hvdlog.get_logger()

class Inside(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        log.info("inside batch")

x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[hvdlog.keras.HvdlogCallback(batch_size=16), Inside()])
log.info("after fit")
hvdlog.shutdown()
"""


def test_keras_loads_only_on_import() -> None:
    """import hvdlog (and configure) never loads Keras."""
    code = "import hvdlog, sys, tempfile; hvdlog.configure(root=tempfile.mkdtemp(), job='k'); assert 'keras' not in sys.modules; hvdlog.shutdown()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_fit(tmp_path: Path) -> None:
    """4 batches x 3 epochs: every event during a batch has its global step and epoch; one
    'epoch done' per epoch with loss, accuracy, samples_per_sec; nothing bound after fit."""
    env = {**os.environ, "KERAS_BACKEND": "torch", "HOROVOD_RANK": "0", "HOROVOD_SIZE": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = tmp_path.glob("k/*/rank-0.jsonl")
    events = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    inside = [e for e in events if e["message"] == "inside batch"]
    assert [(e["step"], e["epoch"]) for e in inside] == [(step, step // 4) for step in range(12)]
    epochs = [e for e in events if e["message"] == "epoch done"]
    assert [e["epoch"] for e in epochs] == [0, 1, 2]
    assert [e["step"] for e in epochs] == [3, 7, 11]
    for event in epochs:
        assert isinstance(event["loss"], float) and event["samples_per_sec"] > 0
        assert 0.0 <= event["extra"]["accuracy"] <= 1.0 and event["extra"]["batches"] == 4
    (after,) = [e for e in events if e["message"] == "after fit"]
    assert "step" not in after and "epoch" not in after
