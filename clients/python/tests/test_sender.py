"""BackgroundSender against the real controller: delivery, safe retries, and a
controller that is killed, hung or restarted while the caller keeps going."""

import os
import signal
import time

import grpc

from foresight_ndsp import (
    BackgroundSender,
    Collective,
    CollectiveKind,
    JobTopology,
    NdspClient,
    NdspError,
    RankEndpoint,
)

MS = 1_000_000


def job_of(controller, job_id):
    return JobTopology(job_id, [RankEndpoint(i, ip) for i, ip in enumerate(controller.hosts)])


def ring(job_id, op_id, n, size=1_000_000):
    return Collective(op_id, job_id, CollectiveKind.RING_ALL_REDUCE, list(reversed(range(n))), size,
                      start_offset_ns=500 * MS, duration_ns=5 * MS)


def wait_for(pred, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def test_sender_registers_the_job_and_delivers(controller, tenant):
    n = len(controller.hosts)
    results = []
    with NdspClient(controller.target, tenant) as client:
        sender = BackgroundSender(client, job=job_of(controller, "job-s"), on_result=lambda p, r: results.append(r))
        for i in range(10):
            assert sender.submit_collective(ring("job-s", f"op-{i}", n))
        assert sender.flush(10)
        counts = sender.close()
        assert (counts.enqueued, counts.sent, counts.failed, counts.dropped_full) == (10, 10, 0, 0)
        listed = client.list_reservations(job_id="job-s")
    assert sorted(r.collective_id for r in listed) == sorted(f"op-{i}" for i in range(10))
    assert {r.reservation_id for r in results} == {r.reservation_id for r in listed}


class LosesFirstAnswer:
    """An NdspClient whose first SubmitCollective reaches the controller but
    whose answer is lost on the way back (what a retry must survive)."""

    def __init__(self, client):
        self.client = client
        self.lost = 0

    def __getattr__(self, name):
        return getattr(self.client, name)

    def send_collective_request(self, request, timeout_s=None):
        answer = self.client.send_collective_request(request, timeout_s)
        if self.lost == 0:
            self.lost += 1
            raise NdspError("SubmitCollective", grpc.StatusCode.UNAVAILABLE, "answer lost (test)")
        return answer


def test_retry_after_a_lost_answer_reserves_once(controller, tenant):
    n = len(controller.hosts)
    results = []
    with NdspClient(controller.target, tenant) as real:
        lossy = LosesFirstAnswer(real)
        sender = BackgroundSender(lossy, job=job_of(controller, "job-r"), backoff_s=0.01,
                                  on_result=lambda p, r: results.append(r))
        # The reference time is fixed at enqueue, so the retry is byte-identical.
        assert sender.submit_collective(ring("job-r", "op-retried", n))
        assert sender.flush(10)
        counts = sender.close()
        listed = real.list_reservations(job_id="job-r")
    assert lossy.lost == 1
    assert (counts.sent, counts.retries, counts.failed) == (1, 1, 0)
    assert len(listed) == 1 and listed[0].collective_id == "op-retried"
    assert results[0].reservation_id == listed[0].reservation_id


def _enqueue_timed(sender, job_id, n, count, prefix):
    lat = []
    accepted = 0
    for i in range(count):
        c = ring(job_id, f"{prefix}-{i}", n)
        t0 = time.perf_counter_ns()
        ok = sender.submit_collective(c)
        lat.append(time.perf_counter_ns() - t0)
        accepted += ok
    return lat, accepted


def test_controller_killed_then_restarted(own_controller, tenant):
    ctl = own_controller
    n = len(ctl.hosts)
    with NdspClient(ctl.target, tenant) as client:
        sender = BackgroundSender(client, job=job_of(ctl, "job-k"), max_queue=64, attempt_timeout_s=0.2,
                                  max_attempts=3, backoff_s=0.02, max_backoff_s=0.1)
        assert sender.submit_collective(ring("job-k", "before", n)) and sender.flush(10)
        assert sender.counters().sent == 1

        ctl.stop()  # SIGKILL: the controller is gone
        lat, accepted = _enqueue_timed(sender, "job-k", n, 2000, "down")
        p50, p99, worst = percentile(lat, 50) / 1e3, percentile(lat, 99) / 1e3, max(lat) / 1e3
        print(f"\nenqueue latency, controller down: p50 {p50:.1f} us, p99 {p99:.1f} us, max {worst:.1f} us (n={len(lat)})")
        assert p99 < 1000, f"p99 enqueue latency {p99:.1f} us while the controller is down"
        down = sender.counters()
        assert down.dropped_full == 2000 - accepted > 0
        assert wait_for(lambda: sender.counters().failed > 0), sender.counters()

        ctl.start()  # a fresh controller without state: the sender registers the job again
        before = sender.counters()
        sender.flush(30)  # what was queued while down either expires, fails or goes out now
        after_lat, _ = _enqueue_timed(sender, "job-k", n, 5, "after")
        assert sender.flush(30)
        end = sender.close()
        assert end.sent >= before.sent + 5, (before, end)
        listed = {r.collective_id for r in client.list_reservations(job_id="job-k")}
    assert {f"after-{i}" for i in range(5)} <= listed
    assert "before" not in listed  # the restarted controller kept no state
    assert end.enqueued == end.sent + end.failed + end.expired + end.queued


def test_controller_hung_does_not_block_the_caller(own_controller, tenant):
    """SIGSTOP: connections open but nothing answers, the slow-controller case."""
    ctl = own_controller
    n = len(ctl.hosts)
    with NdspClient(ctl.target, tenant) as client:
        sender = BackgroundSender(client, job=job_of(ctl, "job-h"), max_queue=32, attempt_timeout_s=0.3,
                                  max_attempts=2, backoff_s=0.02)
        assert sender.submit_collective(ring("job-h", "warm", n)) and sender.flush(10)
        os.kill(ctl.proc.pid, signal.SIGSTOP)
        try:
            lat, accepted = _enqueue_timed(sender, "job-h", n, 1000, "hung")
            p99 = percentile(lat, 99) / 1e3
            print(f"\nenqueue latency, controller hung: p99 {p99:.1f} us (n={len(lat)})")
            assert p99 < 1000
            assert sender.counters().dropped_full == 1000 - accepted > 0
            assert wait_for(lambda: sender.counters().failed > 0, 10)
        finally:
            os.kill(ctl.proc.pid, signal.SIGCONT)
        assert sender.submit_collective(ring("job-h", "resumed", n))
        assert sender.flush(30)
        sender.close()
        listed = {r.collective_id for r in client.list_reservations(job_id="job-h")}
    assert "resumed" in listed
