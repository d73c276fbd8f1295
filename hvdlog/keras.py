"""``hvdlog.keras.HvdlogCallback``: Keras 3 training logged like the rest of the rank's events.

Per batch it binds ``step`` (the global batch count, continuing across epochs) and ``epoch``
(as ``hvdlog.step`` does, so everything logged during the batch carries them, and the stall
watchdog sees progress); at the end of each epoch it logs one ``epoch done`` event with the
epoch's metrics (``loss``, ``lr`` and ``samples_per_sec`` as contract fields, the rest, such as
``accuracy``, under ``extra``). Keras loads only when this module is imported; any backend
works (with Horovod + PyTorch: ``KERAS_BACKEND=torch``).

    import hvdlog, hvdlog.keras
    hvdlog.configure()
    model.fit(x, y, callbacks=[hvdlog.keras.HvdlogCallback(batch_size=64)])

Logging must never hurt training: a failing log call is swallowed.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from typing import Any

import keras

from hvdlog.runtime.config import get_logger
from hvdlog.runtime.context import bind_step, unbind

__all__ = ["HvdlogCallback"]


def _number(value: Any) -> Any:
    """A metric as a plain number (Keras hands over floats, numpy or backend scalars)."""
    with contextlib.suppress(TypeError, ValueError):
        return float(value)
    return value


class HvdlogCallback(keras.callbacks.Callback):  # type: ignore[misc]  # keras ships no type hints
    """Binds ``step``/``epoch`` per batch and logs each epoch's metrics.

    Args:
        batch_size: samples per batch on this rank, for ``samples_per_sec`` (omitted when None).
        first_step: the step of the first batch (e.g. where a restored checkpoint left off).
    """

    def __init__(self, batch_size: int | None = None, first_step: int = 0) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.step = first_step
        self.epoch = 0
        self._token: contextvars.Token[dict[str, Any] | None] | None = None
        self._epoch_started = 0.0
        self._batches = 0
        self._log = get_logger("hvdlog.keras")

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch, self._epoch_started, self._batches = epoch, time.monotonic(), 0

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        with contextlib.suppress(Exception):
            self._unbind()
            self._token = bind_step(self.step, self.epoch)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.step += 1
        self._batches += 1

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        with contextlib.suppress(Exception):
            self._unbind()
            metrics = {key: _number(value) for key, value in (logs or {}).items()}
            if "learning_rate" in metrics:
                metrics["lr"] = metrics.pop("learning_rate")
            seconds = time.monotonic() - self._epoch_started
            if self.batch_size and seconds > 0:
                metrics["samples_per_sec"] = self._batches * self.batch_size / seconds
            self._log.info("epoch done", epoch=epoch, step=self.step - 1, batches=self._batches, epoch_seconds=seconds, **metrics)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        with contextlib.suppress(Exception):
            self._unbind()

    def _unbind(self) -> None:
        if self._token is not None:
            token, self._token = self._token, None
            unbind(token)
