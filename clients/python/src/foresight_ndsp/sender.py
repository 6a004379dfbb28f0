"""Announce without ever blocking the caller: a bounded queue and one thread.

`submit_*` only timestamps the announcement and puts it on the queue
(`put_nowait`); if the queue is full the announcement is dropped and
counted. The sender thread builds each request once and sends it, retrying
transport failures with the *same bytes*: the controller answers an
identical resubmission of a live demand or collective id with the existing
reservation, so a retry after a lost answer never reserves twice. After a
transport failure the job's topology (if given) is registered again before
the next send, so a controller restarted without its state learns the job.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import grpc

from .errors import NdspError
from .types import Collective, Demand, JobTopology


@dataclass(frozen=True)
class SenderCounters:
    """Counts since the sender started. `sent + failed + expired` items left the
    queue; `dropped_full` never entered it."""

    enqueued: int
    sent: int
    dropped_full: int
    failed: int
    expired: int
    retries: int
    queued: int


@dataclass
class _Item:
    kind: str  # "demands" or "collective"
    payload: object
    reference_unix_ns: int
    enqueued_ns: int  # local monotonic clock


class BackgroundSender:
    """Sends announcements from a daemon thread; see the module docstring.

    `client` is an NdspClient (or anything with its send/request methods).
    `max_age_s`: an announcement still unsent after this long is stale
    (its traffic has started) and is discarded as `expired`.
    `on_result(item_payload, result_or_error)` runs on the sender thread.
    """

    def __init__(
        self,
        client,
        *,
        job: Optional[JobTopology] = None,
        max_queue: int = 1024,
        attempt_timeout_s: float = 1.0,
        max_attempts: int = 5,
        backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
        max_age_s: float = 10.0,
        on_result: Optional[Callable[[object, object], None]] = None,
    ):
        if max_queue < 1:
            raise ValueError(f"max_queue: must be at least 1, not {max_queue}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts: must be at least 1, not {max_attempts}")
        self.client = client
        self.job = job
        self.attempt_timeout_s = attempt_timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_age_s = max_age_s
        self.on_result = on_result
        self.last_error: Optional[BaseException] = None
        self._queue: "queue.Queue[_Item]" = queue.Queue(maxsize=max_queue)
        self._lock = threading.Lock()
        self._counts = dict(enqueued=0, sent=0, dropped_full=0, failed=0, expired=0, retries=0)
        self._need_register = job is not None
        self._stop = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._thread = threading.Thread(target=self._run, name="ndsp-sender", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ caller side

    def submit_demands(self, demands: Sequence[Demand], reference_unix_ns: Optional[int] = None) -> bool:
        """Queue a demand batch; False if it was dropped (queue full or closed).
        Offsets count from `reference_unix_ns`, by default the moment of this call."""
        return self._offer("demands", tuple(demands), reference_unix_ns)

    def submit_collective(self, collective: Collective, reference_unix_ns: Optional[int] = None) -> bool:
        """Queue one collective; False if it was dropped."""
        return self._offer("collective", collective, reference_unix_ns)

    def _offer(self, kind: str, payload, reference_unix_ns: Optional[int]) -> bool:
        ref = reference_unix_ns if reference_unix_ns is not None else time.time_ns() + self.client.clock_offset_ns
        item = _Item(kind, payload, ref, time.monotonic_ns())
        if self._stop.is_set():
            self._count("dropped_full")
            return False
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self._count("dropped_full")
            return False
        self._count("enqueued")
        return True

    def counters(self) -> SenderCounters:
        with self._lock:
            return SenderCounters(queued=self._queue.qsize(), **self._counts)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until the queue is empty and nothing is being sent; True if so."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._queue.unfinished_tasks or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.05))
        return True

    def close(self, drain_timeout_s: float = 2.0) -> SenderCounters:
        """Send what is queued (up to the timeout), then stop the thread."""
        self.flush(drain_timeout_s)
        self._stop.set()
        self._thread.join(timeout=self.attempt_timeout_s + 1.0)
        return self.counters()

    def __enter__(self) -> "BackgroundSender":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ sender side

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._queue.get(timeout=0.05)
            except queue.Empty:
                continue
            with self._lock:
                self._in_flight += 1
            try:
                self._deliver(item)
            finally:
                with self._idle:
                    self._in_flight -= 1
                    self._queue.task_done()
                    self._idle.notify_all()

    def _request(self, item: _Item):
        if item.kind == "demands":
            return self.client.demand_request(item.payload, item.reference_unix_ns), self.client.send_demand_request
        return self.client.collective_request(item.payload, item.reference_unix_ns), self.client.send_collective_request

    def _deliver(self, item: _Item) -> None:
        try:
            request, send = self._request(item)
        except Exception as err:  # a payload the bindings refuse (e.g. a negative size)
            self._finish(item, "failed", err)
            return
        backoff = self.backoff_s
        reregistered = False
        for attempt in range(self.max_attempts):
            if (time.monotonic_ns() - item.enqueued_ns) / 1e9 > self.max_age_s:
                self._finish(item, "expired", TimeoutError("announcement older than max_age_s; not sent"))
                return
            try:
                if self._need_register:
                    self.client.register_job(self.job)
                    self._need_register = False
                result = send(request, self.attempt_timeout_s)
            except NdspError as err:
                if err.retryable:
                    self._need_register = self.job is not None
                elif self._job_unknown(err) and not reregistered:
                    self._need_register = reregistered = True
                else:
                    self._finish(item, "failed", err)
                    return
                self.last_error = err
                if attempt + 1 < self.max_attempts:
                    self._count("retries")
                    if self._stop.wait(backoff):
                        break
                    backoff = min(backoff * 2, self.max_backoff_s)
                continue
            self._finish(item, "sent", result)
            return
        self._finish(item, "failed", self.last_error)

    def _job_unknown(self, err: NdspError) -> bool:
        """The controller lost the job (restarted without state): register again."""
        return (
            self.job is not None
            and err.code == grpc.StatusCode.INVALID_ARGUMENT
            and (err.field or "").endswith("job_id")
            and "registered" in err.message
        )

    def _finish(self, item: _Item, outcome: str, result) -> None:
        self._count(outcome)
        if outcome != "sent":
            self.last_error = result
        if self.on_result is not None:
            try:
                self.on_result(item.payload, result)
            except Exception as err:  # the callback must not kill the sender
                self.last_error = err
