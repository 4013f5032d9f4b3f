"""Dynamic batching, as Triton's ``max_batch_size`` and ``max_queue_delay_microseconds``.

Request threads submit jobs (one row per completion); one thread merges queued jobs into a
batch of at most ``max_batch_size`` rows, waiting at most ``max_queue_delay`` for more to
join, and runs the backend. The delay counts from the oldest job's arrival, or from the end
of the previous batch when that is later: the callers of the batch that just finished send
their next requests within milliseconds, and waiting for them keeps a busy server's batches
full, where Triton's rule (from the oldest arrival alone) splits a steady load into two
half-full batches that take turns. The queue is bounded (a full
queue refuses at once, so the caller can answer 503 with Retry-After), and a job whose
deadline passes while it waits is dropped instead of run. A batch that raises is run
again job by job: only the job that fails gets the error (:class:`GenerationFailed`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from serving.gpt2.generation import Backend, Completion, SamplingParams

log = logging.getLogger(__name__)


class QueueFull(RuntimeError):
    pass


class DeadlineExceeded(RuntimeError):
    pass


class GenerationFailed(RuntimeError):
    """The backend raised on this job, even run alone; the log has the exception."""

    def __init__(self, rows: int, cause: BaseException) -> None:
        super().__init__(f"generating {rows} completion(s) failed: {type(cause).__name__}")
        self.__cause__ = cause


@dataclass(frozen=True)
class BatchResult:
    completions: list[Completion]
    #: Rows in the batch that served the job (the job's own included).
    batch_rows: int


@dataclass(eq=False)
class Job:
    prompts: list[list[int]]
    params: list[SamplingParams]
    deadline: float
    #: Called with (row of this job, tokens so far): True ends the row (a stop string).
    stop: Callable[[int, list[int]], bool] | None = None
    future: Future[BatchResult] = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)

    @property
    def rows(self) -> int:
        return len(self.prompts)


class DynamicBatcher:
    def __init__(
        self,
        backend: Backend,
        *,
        max_batch_size: int,
        max_queue_delay_s: float,
        max_queue_rows: int,
        max_total_length: int,
    ) -> None:
        self.backend = backend
        self.max_batch_size = max_batch_size
        self.max_queue_delay_s = max_queue_delay_s
        self.max_queue_rows = max_queue_rows
        self.max_total_length = max_total_length
        self._queue: deque[Job] = deque()
        self._queued_rows = 0
        self._cond = threading.Condition()
        self._stopped = False
        self._idle_since = 0.0  # when the last batch finished (monotonic clock)
        self._thread = threading.Thread(target=self._loop, name="batcher", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Future[BatchResult]:
        if job.rows > self.max_batch_size:
            raise ValueError(f"a job of {job.rows} rows cannot fit a batch of {self.max_batch_size}")
        with self._cond:
            if self._queued_rows + job.rows > self.max_queue_rows:
                raise QueueFull(f"{self._queued_rows} completions are queued (limit {self.max_queue_rows})")
            self._queue.append(job)
            self._queued_rows += job.rows
            self._cond.notify()
        return job.future

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _fits(self, batch: list[Job], job: Job) -> bool:
        """Rows share one padded prompt width and one step count: a TensorRT profile is
        built for at most max_total_length positions, so the merged batch must stay inside."""
        if not batch:
            return True
        jobs = [*batch, job]
        rows = sum(j.rows for j in jobs)
        longest_prompt = max(len(p) for j in jobs for p in j.prompts)
        longest_new = max(p.max_new_tokens for j in jobs for p in j.params)
        return rows <= self.max_batch_size and longest_prompt + longest_new <= self.max_total_length

    def _take(self) -> list[Job]:
        """Block until a batch is ready; an empty list means stop. Jobs stay in the queue
        until their batch leaves, so that a caller who gives up can withdraw its job."""
        with self._cond:
            while True:
                if self._stopped:
                    return []
                if not self._queue:
                    self._cond.wait()
                    continue
                count = 0
                batch: list[Job] = []
                for job in self._queue:
                    if not self._fits(batch, job):
                        break
                    batch.append(job)
                    count += 1
                rows = sum(j.rows for j in batch)
                full = rows >= self.max_batch_size or count < len(self._queue)
                opened = max(self._queue[0].enqueued, self._idle_since)
                remaining = opened + self.max_queue_delay_s - time.monotonic()
                if full or remaining <= 0:
                    for _ in range(count):
                        self._queue.popleft()
                    self._queued_rows -= rows
                    return batch
                self._cond.wait(timeout=remaining)

    def withdraw(self, job: Job) -> None:
        """Drop a job whose caller stopped waiting: its rows free the queue at once."""
        with self._cond:
            try:
                self._queue.remove(job)
            except ValueError:
                return  # already taken into a batch
            self._queued_rows -= job.rows
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return
            now = time.monotonic()
            live = []
            for job in batch:
                if not job.future.set_running_or_notify_cancel():
                    continue  # its caller gave up waiting
                if now > job.deadline:
                    job.future.set_exception(DeadlineExceeded("the request waited in the queue past its deadline"))
                    continue
                live.append(job)
            if live:
                self._run(live)
            with self._cond:
                self._idle_since = time.monotonic()

    def _run(self, jobs: list[Job]) -> None:
        """Run the jobs as one batch. If that raises, each job runs again alone, so that the
        error reaches only the job that causes it: one bad row never fails the others."""
        try:
            completions = self._generate(jobs)
        except Exception as exc:
            if len(jobs) == 1:
                log.exception("a job of %d rows failed", jobs[0].rows)
                jobs[0].future.set_exception(GenerationFailed(jobs[0].rows, exc))
                return
            log.exception("a batch of %d jobs failed: running each alone", len(jobs))
            for job in jobs:
                try:
                    alone = self._generate([job])
                except Exception as err:
                    log.exception("a job of %d rows failed alone", job.rows)
                    job.future.set_exception(GenerationFailed(job.rows, err))
                else:
                    job.future.set_result(BatchResult(alone, job.rows))
            return
        rows = len(completions)
        start = 0
        for job in jobs:
            job.future.set_result(BatchResult(completions[start : start + job.rows], rows))
            start += job.rows

    def _generate(self, jobs: list[Job]) -> list[Completion]:
        prompts = [p for j in jobs for p in j.prompts]
        params = [p for j in jobs for p in j.params]
        owners = [(j, row) for j in jobs for row in range(j.rows)]

        def stop(row: int, tokens: list[int]) -> bool:
            job, local = owners[row]
            return job.stop is not None and job.stop(local, tokens)

        completions = self.backend.generate(prompts, params, stop)
        if len(completions) != len(prompts):
            raise RuntimeError(f"the backend returned {len(completions)} completions for {len(prompts)} rows")
        return completions
