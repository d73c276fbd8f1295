"""The safety net (issue 41): a failure in a format no rule knows is never invisible, and the
confidence rules of docs/failure-model.md ("Confidence") hold on small logs written for each rule."""

from __future__ import annotations

from typing import Any

import pytest

from hvdlog.analyses.failures import first_failure
from hvdlog.documents import get_field
from hvdlog.parse import parse_lines


def _console(text: str) -> list[dict[str, Any]]:
    return list(parse_lines(text.strip("\n").splitlines(), path="console.log", timezone="UTC"))


def _one(line: str) -> dict[str, Any]:
    (doc,) = _console(line)
    return doc


@pytest.mark.parametrize("line", [
    "Segmentation fault: 11",  # MXNet's handler (a signal row now)
    "  [bt] (3) /usr/lib/python3/site-packages/mxnet/libmxnet.so(+0x3a14c70) [0x7f91a2617c70]",
    "#3  0x00007f3c2a1b4c70 in ncclAllReduce () from /usr/lib/libnccl.so.2",
    "*** An error occurred in MPI_Init_thread",
    "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,",
    "[node-1:4242] *** Process received signal ***",
    "bash: orted: command not found",
    "ORTE was unable to reliably start one or more daemons.",
    "[1612345678.123] [host:123:0] ib_iface.c:746 UCX ERROR Transport retry count exceeded on mlx5_0:1/IB",
    "E tensorflow/core/common_runtime/bfc_allocator.cc:244] tried to allocate 0 bytes",
    "2021-03-04 12:00:00.123 | ERROR    | train:step:12 - loss is NaN",
    "E1205 12:00:00.123456  4242 train.py:12] could not write the checkpoint",
    "Horovod has been shut down. This was caused by an exception on one of the ranks",
    "train.py: error: unrecognized arguments: --warmup 5",
    "Process 3 exit with status code 1.",
])
def test_a_failure_shaped_line_is_an_error(line: str) -> None:
    """Each shape of the issue (words, backtraces, MPI's stars, loggers' levels) comes out at error or above."""
    doc = _one(line)
    assert get_field(doc, "log.level") in ("error", "critical"), line
    assert get_field(doc, "hvdlog.evidence.kind") is not None


@pytest.mark.parametrize(("line", "level"), [
    ("Epoch 1/10 - loss: 0.31 - error: 0.12", "info"),  # a metric
    ("collected 12 tests: 12 passed, 0 failed", "info"),  # a count
    ("/opt/conda/lib/python3.8/site-packages/torch/functional.py:12: UserWarning: cannot reuse the buffer", "info"),
    ("WARNING:root:the learning rate is high", "warning"),
    ("2022-07-04 10:12:58,301\tWARNING worker.py:1404 -- A worker died or was killed while executing a task", "warning"),
    ("W tensorflow/core/platform/cpu_feature_guard.cc:45] The TensorFlow library was not compiled to use AVX", "warning"),
    ("host-1:4242:4300 [0] NCCL INFO NET/IB : Unable to open device mlx5_1", "info"),
    ("Exception in thread Thread-3 (prefetch):", "info"),  # the traceback after it carries the error
    ("Terminating remaining workers after failure of Process 2.", "info"),  # the launcher's verdict: evidence, not an error
    ("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", "info"),
    ("Epoch 3: 100%|##########| 469/469 [00:12<00:00, 37.2it/s]", "info"),
])
def test_a_benign_line_stays_quiet(line: str, level: str) -> None:
    """Metrics, counts, Python warnings, loggers' own lower levels, launchers' narration: no error."""
    assert get_field(_one(line), "log.level") == level


@pytest.mark.parametrize(("line", "level"), [
    # a process's own crash report, in formats no row knows: critical (the process dies with it)
    ("[node17:21904:0:21977] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x18)", "critical"),
    ("worker 3 received signal SIGBUS, exiting", "critical"),
    ("*** Error in `python': double free or corruption (fasttop): 0x00007f3a5c01d2e0 ***", "critical"),
    ("*** stack smashing detected ***: terminated", "critical"),
    ("free(): invalid next size (normal)", "critical"),
    ("corrupted size vs. prev_size", "critical"),
    # failure-shaped, but not a crash: error
    ("[node17:21904:0:21977] Caught signal 15 (Terminated)", "error"),
    ("*** End of error message ***", "error"),
    ("THCudaCheck FAIL file=/opt/pytorch/aten/src/THC/THCGeneral.cpp line=383 error=8 : invalid device function", "error"),
    ("[/tmp/pip-build/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection timed out", "error"),
    # near-misses: a count, a setting, a word inside another
    ("tests: 12 PASS, FAIL: 0", "info"),
    ("the gloo timeout is 30 s", "info"),
    ("FAILOVER node ready", "info"),
    ("WARNING: caught signal 11 in a child process, ignored", "warning"),  # it calls itself a warning: no failure, a warning
    # Open MPI's single-copy read refused (a container without SYS_PTRACE): the job goes on, slower
    ("[5c1f0e9a2b7d:00351] Read -1, expected 321120, errno = 1", "warning"),
])
def test_the_level_a_shape_gives(line: str, level: str) -> None:
    """The net's two shapes (a crash report: critical; any failure: error) and their near-misses."""
    assert get_field(_one(line), "log.level") == level


def test_an_unknown_crash_report_is_a_possible_failure() -> None:
    """A crash report no row knows (UCX's handler) names its rank, critical, but never surer than `possible`."""
    docs = _console("""
[1,3]<stdout>:Epoch 1: step 40/500 loss 2.131
[1,3]<stderr>:[node17:21904:0:21977] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x18)
[1,0]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [3]
    assert report.cause.startswith("a failure in a format hvdlog does not know: rank 3: ")
    assert report.confidence == "possible"


def test_an_unknown_format_is_reported_as_a_possible_failure() -> None:
    """A job whose only failure is in a format no rule knows: first-failure names it, `possible`."""
    docs = _console("""
[0]<stdout>:step 10 loss 0.3
[1]<stdout>:step 10 loss 0.3
[1]<stderr>:[12:00:01] src/storage/storage.cc:99: Check failed: e == cudaSuccess CUDA: an illegal memory access
[1]<stderr>:  [bt] (0) /opt/conda/lib/python3.7/site-packages/mxnet/libmxnet.so(+0x3a14c70) [0x7f91a2617c70]
[0]<stderr>:[1612345678.123] [host:123:0] ib_iface.c:746 UCX ERROR Transport retry count exceeded on mlx5_0:1/IB
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1]
    assert report.cause.startswith("a failure in a format hvdlog does not know: rank 1: ")
    assert report.confidence == "possible"


def test_an_unrecognised_line_before_a_recognised_failure_caps_the_confidence() -> None:
    """Rank 0's unknown crash report comes first: rank 1's later segfault is not `certain`."""
    docs = _console("""
[0]<stderr>:*** Aborted at 1589423911 (unix time) try "date -d @1589423911" if you are using GNU date ***
[0]<stderr>:*** End of error message ***
[1]<stderr>:Segmentation fault (core dumped)
""")
    (report,) = first_failure(docs)
    assert report.confidence == "possible"


def test_a_recognised_first_failure_alone_is_certain() -> None:
    """The same segfault with nothing before it: `certain` (the test above fails for a reason)."""
    docs = _console("""
[1]<stderr>:Segmentation fault (core dumped)
[0]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1] and report.confidence == "certain"


def test_launcher_exits_of_the_same_kind_are_not_made_a_chain() -> None:
    """Four ranks exit with 1 at start-up and print nothing: no one of them is the cause of the others."""
    docs = _console("""
Process 2 exit with status code 1.
Process 0 exit with status code 1.
Process 1 exit with status code 1.
Process 3 exit with status code 1.
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [0, 1, 2, 3]
    assert report.cause.startswith("ranks 0-3 failed the same way")
    assert report.collateral == []
    assert report.confidence != "certain"


def test_a_known_benign_error_line_is_no_failure() -> None:
    """TensorFlow's `failed call to cuInit` on a CPU rank that goes on is not a failure."""
    docs = _console("""
[1]<stderr>:2020-01-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_driver.cc:351] failed call to cuInit: CUDA_ERROR_NO_DEVICE
[1]<stdout>:step 1 loss 0.4
""")
    assert first_failure(docs) == []


#: Horovod's stall warning (it ends in a space), tagged by Open MPI.
_STALL_HEADER = (
    "[1,0]<stderr>:[2020-05-04 10:00:00.000000: W /tmp/horovod/common/stall_inspector.cc:107] One or more tensors were "
    "submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more "
    "than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that only subset "
    "of ranks is submitting tensors, which will cause deadlock. "
)


def test_a_stall_found_outranks_the_launchers_summary_of_a_waiting_rank() -> None:
    """The stall report names rank 1 missing; Open MPI's box then names rank 0 (which was waiting)."""
    docs = _console(f"""
{_STALL_HEADER}
[1,0]<stderr>:Missing ranks:
[1,0]<stderr>:1: [allreduce.grad_0]
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[4411,1],0]
  Exit code:    1
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1]
    assert report.stall is not None and report.stall["shutdown"] is False


def _errors(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [doc for doc in docs if get_field(doc, "log.level") in ("error", "critical")]


def test_tf_root_errors_without_their_type_are_read_by_their_entries() -> None:
    """TensorFlow 2's `N root error(s) found.` behind an application's wrapper (no exception type) is one
    block with its entries: when they are Horovod's shutdown, the rank is collateral, not a second failure."""
    docs = _console("""
[1]<stderr>:User function raise error: 2 root error(s) found.
[1]<stderr>:  (0) Unknown: Horovod has been shut down. This was caused by an exception on one of the ranks.
[1]<stderr>:\t [[{{node HorovodAllreduce_grads_0}}]]
[1]<stderr>:  (1) Unknown: Horovod has been shut down. This was caused by an exception on one of the ranks.
[1]<stderr>:0 successful operations.
[1]<stderr>:0 derived errors ignored.
[0]<stderr>:ValueError: the batch has 1 value, expected 2
""")
    (block, _) = _errors(docs)
    assert block["message"].endswith("0 derived errors ignored.") and block["rank"] == 1
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [0]
    assert [item["rank"] for item in report.collateral] == [1] and report.other_errors == []


def test_tf_root_errors_of_a_real_failure_stay_a_failure() -> None:
    """The same block whose entry is a failure of its own (out of memory) is still the rank's failure: the
    block is no consequence because of its header, and a format no rule knows says `possible`."""
    docs = _console("""
[0]<stdout>:step 10 loss 0.3
[1]<stderr>:User function raise error: 1 root error(s) found.
[1]<stderr>:  (0) Resource exhausted: OOM when allocating tensor with shape[4096,4096]
[1]<stderr>:0 successful operations.
""")
    (block,) = _errors(docs)
    assert "Resource exhausted" in block["message"]
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1] and report.confidence == "possible"


_PY4J = """
Traceback (most recent call last):
  File "train_spark.py", line 40, in <module>
    model = estimator.fit(df)
py4j.protocol.Py4JJavaError: An error occurred while calling o88.fit.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 4.0 failed 4 times
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)
\tat org.apache.spark.scheduler.DAGScheduler.abortStage(DAGScheduler.scala:1877)
\tat org.apache.spark.rdd.RDD.collect(RDD.scala:990)
Caused by: org.apache.spark.api.python.PythonException: the worker's task failed
\tat org.apache.spark.api.python.BasePythonRunner.read(PythonRunner.scala:452)
Caused by: java.io.FileNotFoundException: /tmp/intermediate/part-00003.parquet (No such file or directory)
\t... 3 more
"""


def test_a_java_stack_after_py4j_is_one_error_and_its_root_cause_is_named() -> None:
    """py4j prints the JVM's stack after its own exception line: one error document, and the cause names
    the last `Caused by:` (Java's root cause), not the frames."""
    docs = _console(_PY4J)
    (error,) = _errors(docs)
    assert error["message"].splitlines()[-1] == "\t... 3 more"
    (report,) = first_failure(docs)
    assert report.cause.endswith("(caused by java.io.FileNotFoundException: /tmp/intermediate/part-00003.parquet (No such file or directory))")
    assert "FileOutputStream" not in report.cause and "Task 0 in stage 4.0 failed 4 times" in report.cause


def test_rays_actor_died_error_follows_from_the_workers_own_error() -> None:
    """Ray's driver raises RayActorError when a worker (an actor) died: the driver's reaction, so the
    worker's earlier error record is the first failure; the driver's error alone names nobody."""
    driver = """
Traceback (most recent call last):
  File "train_ray.py", line 12, in <module>
    executor.run(train)
ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.
"""
    (report,) = first_failure(_console("(pid=811) 2021-02-25 08:46:29,870 [ERROR] no shard left to read\n" + driver))
    assert "no shard left to read" in report.cause and report.confidence == "possible"
    (alone,) = first_failure(_console(driver))
    assert alone.culprit is None and alone.confidence == "unknown"
