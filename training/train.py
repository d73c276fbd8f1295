"""A realistic Horovod + PyTorch training script that logs through hvdlog.

Copy from it: the two hvdlog lines are ``hvdlog.configure(...)`` and
``with hvdlog.step(step, epoch=epoch):``; everything else is ordinary Horovod.

Run it (2 ranks, CPU)::

    horovodrun -np 2 -H localhost:2 --gloo python training/train.py --log-root logs

Faults for demos and tests (each names one rank):

    --straggler-rank R [--straggler-delay S]   rank R sleeps S s every step
    --hang-rank R --hang-at-step N             rank R stops making progress at step N
        [--hang-phase backward]                ... halfway through loss.backward(): the dense
                                               layers' gradients submitted, the conv layers' not
    --crash-rank R --crash-at-step N           rank R raises at step N
"""

from __future__ import annotations

import argparse
import os
import signal
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

import horovod.torch as hvd
import torch
import torch.nn.functional as F  # noqa: N812 - the usual alias
from torch import nn

import hvdlog


class InjectedFault(RuntimeError):  # noqa: N818 - the corpus and tests name this exact type
    """Raised by --crash-rank, so a test can tell the injected crash from a real one."""


class SmallCNN(nn.Module):
    """Two conv layers and two dense layers: the classic MNIST model, small enough for a CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=5)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor, backward_hook: Callable[[torch.Tensor], None] | None = None) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        if backward_hook is not None:  # runs in backward once the dense layers' gradients are done
            x.register_hook(backward_hook)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_mnist(samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An MNIST-shaped dataset made in-process: a class-dependent blob plus noise, so loss falls."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (samples,), generator=generator)
    images = torch.rand(samples, 1, 28, 28, generator=generator) * 0.3
    for digit in range(10):
        row, col = 2 + (digit // 5) * 12, 2 + (digit % 5) * 5
        images[labels == digit, :, row : row + 10, col : col + 4] += 0.7
    return (images - 0.1307) / 0.3081, labels


def read_idx_mnist(directory: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Real MNIST from the standard IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte)."""
    images_path, labels_path = directory / "train-images-idx3-ubyte", directory / "train-labels-idx1-ubyte"
    for path in (images_path, labels_path):
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: --mnist-dir needs the uncompressed MNIST IDX files")
    raw_images, raw_labels = images_path.read_bytes(), labels_path.read_bytes()
    magic, count, rows, cols = struct.unpack(">IIII", raw_images[:16])
    if magic != 2051 or struct.unpack(">II", raw_labels[:8])[0] != 2049:
        raise ValueError(f"{directory} does not hold MNIST IDX files (bad magic numbers)")
    images = torch.frombuffer(bytearray(raw_images[16:]), dtype=torch.uint8).reshape(count, 1, rows, cols)
    labels = torch.frombuffer(bytearray(raw_labels[8:]), dtype=torch.uint8).long()
    return (images.float() / 255 - 0.1307) / 0.3081, labels


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; fault flags are off by default."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--samples", type=int, default=4096, help="synthetic dataset size")
    parser.add_argument("--mnist-dir", type=Path, help="use real MNIST IDX files from this directory")
    parser.add_argument("--log-root", help="hvdlog root directory (default: HVDLOG_ROOT or ./hvdlog-logs)")
    parser.add_argument("--job", help="job id (default: HVDLOG_JOB or derived)")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--stall-after", type=float, default=30.0, help="seconds without progress before a stall event")
    parser.add_argument("--straggler-rank", type=int)
    parser.add_argument("--straggler-delay", type=float, default=0.2)
    parser.add_argument("--hang-rank", type=int)
    parser.add_argument("--hang-at-step", type=int, default=5)
    parser.add_argument("--hang-seconds", type=float, default=3600.0, help="how long the hung rank sleeps")
    parser.add_argument(
        "--hang-phase", choices=("step", "backward"), default="step",
        help="hang before the step's forward pass, or inside loss.backward() between the dense and conv layers",
    )
    parser.add_argument("--crash-rank", type=int)
    parser.add_argument("--crash-at-step", type=int, default=5)
    parser.add_argument("--fault", choices=FAULTS, help="a fault for the fault-matrix benchmark (bench/bench_faults.py)")
    parser.add_argument("--fault-rank", type=int, default=1)
    parser.add_argument("--fault-at-step", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Train; returns the process exit code."""
    args = parse_args(argv)
    # Configured before hvd.init(): a failure during init is still attributed to this rank.
    config = hvdlog.configure(root=args.log_root, job=args.job, level=args.log_level, stall_after=args.stall_after)
    args.capture_pid = config.capture.process.pid if config.capture is not None and config.capture.process is not None else None
    log = hvdlog.get_logger("hvdlog.train")
    hvd.init()
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    log.info("training starts", config=vars(args))

    images, labels = read_idx_mnist(args.mnist_dir) if args.mnist_dir else synthetic_mnist(args.samples, seed=0)
    shard = torch.arange(hvd.rank(), len(labels), hvd.size())
    images, labels = images[shard], labels[shard]

    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    step = 0
    for epoch in range(args.epochs):
        for batch in range(args.steps_per_epoch):
            step += 1
            with hvdlog.step(step, epoch=epoch):
                started = time.perf_counter()
                hang_in_backward = inject_faults(args, step, log)
                start = (batch * args.batch_size) % max(len(labels) - args.batch_size, 1)
                x, y = next(Loader(images, labels, start, args.batch_size, matrix_fault(args, step, log)))
                optimizer.zero_grad()
                loss = F.nll_loss(model(x, hang_in_backward), y)
                loss.backward()
                # This rank's own speed: time to here, before optimizer.step() waits for the
                # allreduce (which makes every rank's whole step equally long: measured over
                # the whole step, samples_per_sec is the same on every rank and stragglers
                # has nothing to compare).
                compute = time.perf_counter() - started
                optimizer.step()
                # Metric averaging: every rank logs the job-wide loss.
                mean_loss = hvd.allreduce(loss.detach(), name="metric.loss", op=hvd.Average).item()
                log.info(
                    "train step",
                    loss=round(mean_loss, 6),
                    lr=optimizer.param_groups[0]["lr"],
                    samples_per_sec=round(len(y) / compute, 1),
                    step_seconds=round(time.perf_counter() - started, 6),
                )
        log.info("epoch done", epoch=epoch)
    log.info("training done", steps=step)
    hvdlog.shutdown()
    return 0


#: --fault kinds: kill (SIGKILL, as the OOM killer), stop (SIGSTOP), loader-hang (a hang in the data
#: loader), diverge (an allreduce the other ranks never submit), input-straggler (a slow loader every
#: step from --fault-at-step on), compute-straggler (extra compute every step from then on),
#: capture-stuck (the rank's native log capture process stopped, as ``kill -STOP`` or a wedged disk
#: write would; the rank then prints, as a chatty loop does, and makes no progress for --hang-seconds).
FAULTS = ("kill", "stop", "loader-hang", "diverge", "input-straggler", "compute-straggler", "capture-stuck")


class Loader:
    """One batch, as a data loader hands it over; ``fault`` runs inside ``__next__`` (a hang or a slow read there)."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, start: int, size: int, fault: Callable[[], None] | None) -> None:
        self.batch = images[start : start + size], labels[start : start + size]
        self.fault = fault

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.fault is not None:
            self.fault()
        return self.batch


def matrix_fault(args: argparse.Namespace, step: int, log: object) -> Callable[[], None] | None:
    """The --fault flag: acts now (kill, stop, diverge) or returns what the loader runs (a hang, a slow read, extra compute).

    The fault's own time is logged first (``injected fault: KIND``): the benchmark measures from it.
    """
    if args.fault is None or hvd.rank() != args.fault_rank or step < args.fault_at_step:
        return None
    if step == args.fault_at_step:
        log.warning(f"injected fault: {args.fault}", fault=args.fault)  # type: ignore[attr-defined]
    if step > args.fault_at_step and not args.fault.endswith("straggler"):
        return None
    if args.fault in ("kill", "stop"):
        os.kill(os.getpid(), signal.SIGKILL if args.fault == "kill" else signal.SIGSTOP)
    if args.fault == "diverge":
        hvd.allreduce(torch.ones(3), name=f"diverged.rank{hvd.rank()}")  # never matched: the others submit their gradients
    if args.fault == "loader-hang":
        return lambda: time.sleep(args.hang_seconds)
    if args.fault == "capture-stuck" and args.capture_pid is not None:
        os.kill(args.capture_pid, signal.SIGSTOP)
        return lambda: _chatty(args.hang_seconds)
    if args.fault == "input-straggler":
        return lambda: time.sleep(args.straggler_delay)
    if args.fault == "compute-straggler":
        return lambda: _busy(args.straggler_delay)
    return None


def _chatty(seconds: float) -> None:
    """Print for ``seconds`` without progress: each print waits on the stopped capture (hvdlog's guard bounds the wait)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        print("still loading " + "." * 1000, flush=True)
        time.sleep(0.01)


def _busy(seconds: float) -> None:
    """Compute for ``seconds`` (a slow GPU or CPU, not a wait)."""
    end = time.perf_counter() + seconds
    a = torch.randn(64, 64)
    while time.perf_counter() < end:
        a = torch.tanh(a @ a)


def inject_faults(args: argparse.Namespace, step: int, log: object) -> Callable[[torch.Tensor], None] | None:
    """The fault flags: a slow rank, a rank that stops progressing, a rank that raises.

    Returns the gradient hook that hangs this step's backward pass, for ``--hang-phase backward``.
    """
    rank = hvd.rank()
    if args.straggler_rank == rank:
        time.sleep(args.straggler_delay)
    if args.hang_rank == rank and step == args.hang_at_step:
        log.warning("injected hang: this rank stops making progress", hang_seconds=args.hang_seconds)  # type: ignore[attr-defined]
        if args.hang_phase == "backward":
            return lambda _gradient: time.sleep(args.hang_seconds)
        time.sleep(args.hang_seconds)
    if args.crash_rank == rank and step == args.crash_at_step:
        raise InjectedFault(f"injected fault on rank {rank} at step {step}")
    return None


if __name__ == "__main__":
    sys.exit(main())
