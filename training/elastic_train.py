"""An elastic Horovod + PyTorch training script that logs through hvdlog.

Copy from it: ``hvd.elastic.run`` around the training loop, a ``TorchState`` that holds the
model, the optimizer and the position (``epoch``, ``batch``), ``state.commit()`` every few
steps, and a reset callback. hvdlog needs nothing more than in ``train.py``: each reset is an
``elastic_reset`` event, and every event after it carries the process's new rank.

Run it (3 workers, at least 2, CPU; ``discover.sh`` prints one ``host:slots`` line per host)::

    hvdlog run --job elastic -- horovodrun --gloo -np 3 --min-np 2 --max-np 3 \\
        --host-discovery-script ./discover.sh python training/elastic_train.py

A fault for demos and tests: ``--kill-rank R --kill-at-step N`` makes rank R SIGKILL itself at
step N, once: the survivors restore the last commit, reset and go on.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import horovod.torch as hvd
import torch
import torch.nn.functional as F  # noqa: N812 - the usual alias
from torch import nn

import hvdlog


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps-per-epoch", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--commit-every", type=int, default=2, help="steps between state.commit() (the steps since are replayed after a failure)")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step (gives host discovery time to see a change)")
    parser.add_argument("--log-root", help="hvdlog root directory (default: HVDLOG_ROOT or ./hvdlog-logs)")
    parser.add_argument("--job", help="job id (default: HVDLOG_JOB, which hvdlog run sets)")
    parser.add_argument("--kill-rank", type=int)
    parser.add_argument("--kill-at-step", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Train elastically; returns the process exit code."""
    args = parse_args(argv)
    hvdlog.configure(root=args.log_root, job=args.job)  # before hvd.init(), as in train.py
    log = hvdlog.get_logger("hvdlog.elastic_train")
    hvd.init()
    torch.manual_seed(1234)
    torch.set_num_threads(1)

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    # The learning rate follows the job's size after a reset (the reset callback below).
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    # Everything the job needs to go on after a reset; synced from rank 0 to new workers.
    # ``resets`` counts the resets (the demo kill happens once, not again in the replay).
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0, resets=0)

    def on_reset() -> None:
        state.resets += 1
        state.save()  # without it, the sync that follows restores the last commit's count
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        log.info("reset callback: the job goes on", size=hvd.size())

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state: hvd.elastic.TorchState) -> None:
        while state.epoch < args.epochs:
            while state.batch < args.steps_per_epoch:
                step = state.epoch * args.steps_per_epoch + state.batch + 1
                with hvdlog.step(step, epoch=state.epoch):
                    if args.kill_rank == hvd.rank() and args.kill_at_step == step and state.resets == 0:
                        log.warning("killing this worker (--kill-rank)")
                        os.kill(os.getpid(), signal.SIGKILL)
                    started = time.perf_counter()
                    x = torch.randn(args.batch_size, 16)
                    y = (x[:, :4].argmax(dim=1) + hvd.rank()) % 4
                    optimizer.zero_grad()
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    compute = time.perf_counter() - started  # this rank's speed, before the allreduce wait
                    optimizer.step()
                    log.info("train step", loss=round(loss.item(), 6), samples_per_sec=round(len(y) / compute, 1))
                    time.sleep(args.step_seconds)
                state.batch += 1
                if state.batch % args.commit_every == 0:
                    state.commit()  # a restore point; also where added or removed hosts are seen
                else:
                    state.check_host_updates()
            log.info("epoch done", epoch=state.epoch)
            state.epoch, state.batch = state.epoch + 1, 0
            state.commit()

    train(state)
    log.info("training done", size=hvd.size(), resets=state.resets)
    hvdlog.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
