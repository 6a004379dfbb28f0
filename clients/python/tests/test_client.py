"""NdspClient against the real controller: the round trip and the error model."""

import grpc
import pytest

from foresight_ndsp import (
    Collective,
    CollectiveKind,
    Demand,
    JobTopology,
    NdspClient,
    NdspError,
    RankEndpoint,
    ReservationStatus,
)

MS = 1_000_000


def job_of(controller, job_id="job-a"):
    return JobTopology(job_id, [RankEndpoint(i, ip) for i, ip in enumerate(controller.hosts)])


@pytest.fixture
def client(controller, tenant):
    with NdspClient(controller.target, tenant) as c:
        yield c


def test_handshake_reports_version_and_clock(client):
    info = client.handshake()
    assert info.version[0] == 1
    assert CollectiveKind.RING_ALL_REDUCE in info.supported_collective_kinds
    assert info.max_demands_per_request >= 1
    # Same machine: the estimated offset is the round trip at most.
    assert abs(info.clock_offset_ns) < 1_000 * MS


def test_register_submit_list_cancel_round_trip(controller, client):
    reg = client.register_job(job_of(controller))
    assert (reg.job_id, reg.registered_ranks, reg.generation) == ("job-a", len(controller.hosts), 1)

    demand = Demand("d-1", 0, 2, 8_000_000, start_offset_ns=200 * MS, duration_ns=10 * MS, job_id="job-a")
    [res] = client.submit_demands([demand])
    assert res.status is ReservationStatus.ADMITTED, res.advisory
    assert res.demand_id == "d-1" and res.job_id == "job-a"
    [flow] = res.flows
    assert (flow.source_address, flow.destination_address) == (controller.hosts[0], controller.hosts[2])
    assert flow.accepted_bps == 8_000_000 * 8 * 1_000_000_000 // (10 * MS)
    assert flow.hops and flow.hops[0].node.startswith("leaf")

    # Ring all-reduce listed high to low, so rank r sends to r-1 (gloo's ring).
    n = len(controller.hosts)
    size = 4_000_000
    ring = Collective("ar-1", "job-a", CollectiveKind.RING_ALL_REDUCE, list(reversed(range(n))), size,
                      start_offset_ns=200 * MS, duration_ns=20 * MS)
    cres = client.submit_collective(ring)
    assert cres.status is ReservationStatus.ADMITTED, cres.advisory
    pairs = {(f.source_address, f.destination_address) for f in cres.flows}
    assert pairs == {(controller.hosts[r], controller.hosts[r - 1]) for r in range(n)}
    for f in cres.flows:  # 2(N-1)/N * S per ring link
        assert f.accepted_bps * (f.end_unix_ns - f.start_unix_ns) // 8_000_000_000 == pytest.approx(
            2 * (n - 1) * size // n, rel=1e-3)

    listed = {r.reservation_id: r for r in client.list_reservations(job_id="job-a")}
    assert set(listed) == {res.reservation_id, cres.reservation_id}
    assert client.get_reservation(cres.reservation_id).collective_id == "ar-1"

    assert client.cancel(demand_id="d-1") == [res.reservation_id]
    assert client.get_reservation(res.reservation_id).status is ReservationStatus.CANCELLED
    assert client.cancel(job_id="job-a") == [cres.reservation_id]
    statuses = {r.status for r in client.list_reservations(job_id="job-a")}
    assert statuses == {ReservationStatus.CANCELLED}


def test_identical_resubmission_returns_the_same_reservation(controller, client):
    client.register_job(job_of(controller, "job-b"))
    d = Demand("d-retry", 1, 3, 1_000_000, start_offset_ns=300 * MS, duration_ns=5 * MS, job_id="job-b")
    c = Collective("ar-retry", "job-b", CollectiveKind.RING_ALL_REDUCE, [3, 2, 1, 0], 1_000_000,
                   start_offset_ns=300 * MS, duration_ns=5 * MS)
    first = (client.submit_demands([d])[0], client.submit_collective(c))
    again = (client.submit_demands([d])[0], client.submit_collective(c))
    assert [r.reservation_id for r in again] == [r.reservation_id for r in first]
    assert len(client.list_reservations(job_id="job-b")) == 2
    # The same id with other contents is refused, naming the field.
    with pytest.raises(NdspError) as err:
        client.submit_demands([Demand("d-retry", 1, 3, 2_000_000, start_offset_ns=300 * MS,
                                      duration_ns=5 * MS, job_id="job-b")])
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert err.value.field == "demands[0].demand_id"


def test_malformed_request_names_the_field(controller, client):
    client.register_job(job_of(controller, "job-c"))
    good = dict(start_offset_ns=100 * MS, duration_ns=MS, job_id="job-c")
    bad = [Demand("ok-1", 0, 1, 1000, **good), Demand("bad-2", "10.0.0.300", 1, 1000, **good)]
    with pytest.raises(NdspError) as err:
        client.submit_demands(bad)
    e = err.value
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.field == "demands[1].source.host_address"
    assert "10.0.0.300" in e.reason and "IPv4" in e.reason
    assert "demands[1].source.host_address" in str(e)
    # A rejected batch changes nothing: the good demand was not reserved either.
    assert client.list_reservations(job_id="job-c") == []

    with pytest.raises(NdspError) as err:
        client.submit_collective(Collective("ar-x", "job-c", CollectiveKind.RING_ALL_REDUCE, [0, 9], 1000,
                                            start_offset_ns=MS, duration_ns=MS))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field.startswith("collective.ranks")


def test_client_side_shape_errors_name_the_field():
    with pytest.raises(ValueError, match=r"Demand\('x'\)\.start: give exactly one of start_offset_ns or start_unix_ns"):
        Demand("x", 0, 1, 10, duration_ns=1)
    with pytest.raises(ValueError, match=r"\.pacing"):
        Demand("x", 0, 1, 10, start_offset_ns=1, duration_ns=1, rate_bps=5)
    with pytest.raises(ValueError, match=r"\.source"):
        Demand("x", 1.5, 1, 10, start_offset_ns=1, duration_ns=1)
    with pytest.raises(ValueError, match=r"cancel: give exactly one"):
        NdspClient("127.0.0.1:1", "t").cancel()


def test_unreachable_controller_is_a_retryable_error():
    with NdspClient(f"127.0.0.1:{__import__('harness').free_port()}", "t", timeout_s=0.5) as c:
        with pytest.raises(NdspError) as err:
            c.handshake()
    assert err.value.retryable and err.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def test_watch_events_streams_telemetry(controller, client):
    client.register_job(job_of(controller, "job-w"))
    stream = client.watch_events(job_ids=["job-w"], telemetry_interval_ns=20 * MS)
    try:
        first, second = next(stream), next(stream)
    finally:
        stream.cancel()
    assert (first.kind, second.kind) == ("telemetry", "telemetry")
    assert second.sequence == first.sequence + 1


def test_entropy_steering_hands_out_source_ports(own_controller, tenant):
    """A controller that steers by source ports (--steering entropy-only):
    a demand that names its QP gets the UDP source port to send on, its
    path and no labels; one that does not (the switches hash the QP) falls
    back to ECMP with no port."""
    own_controller.stop()
    own_controller.start(extra_args=["--steering", "entropy-only"])
    with NdspClient(own_controller.target, tenant) as c:
        hosts = own_controller.hosts
        known = Demand("d-qp", hosts[0], hosts[2], 8_000_000, start_offset_ns=200 * MS, duration_ns=10 * MS,
                       dest_qp=0x1234)
        unknown = Demand("d-any", hosts[1], hosts[3], 8_000_000, start_offset_ns=200 * MS, duration_ns=10 * MS)
        by_id = {r.demand_id: r for r in c.submit_demands([known, unknown])}
    [flow] = by_id["d-qp"].flows
    assert by_id["d-qp"].status is ReservationStatus.ADMITTED, by_id["d-qp"].advisory
    assert flow.udp_src_port is not None and 49152 <= flow.udp_src_port <= 65535
    assert flow.sr_label_stack == () and flow.hops
    [other] = by_id["d-any"].flows
    assert by_id["d-any"].status is ReservationStatus.FALLBACK_ECMP
    assert other.udp_src_port is None and other.reason == "NO_PATH"


def test_a_demand_may_let_the_controller_choose_its_queue_pair(own_controller, tenant):
    """Offered a range of destination QPs, a controller that steers by
    source ports answers with one of them and the port to send on; a demand
    cannot give both a QP and choices."""
    own_controller.stop()
    own_controller.start(extra_args=["--steering", "entropy-only"])
    with NdspClient(own_controller.target, tenant) as c:
        hosts = own_controller.hosts
        offered = Demand("d-choose", hosts[0], hosts[2], 8_000_000, start_offset_ns=200 * MS, duration_ns=10 * MS,
                         dest_qp_choices=(0x2000, 64))
        [r] = c.submit_demands([offered])
    [flow] = r.flows
    assert r.status is ReservationStatus.ADMITTED, r.advisory
    assert flow.dest_qp is not None and 0x2000 <= flow.dest_qp < 0x2040
    assert flow.udp_src_port is not None and flow.sr_label_stack == ()
    with pytest.raises(ValueError, match="dest_qp"):
        Demand("d-both", hosts[0], hosts[2], 1, start_offset_ns=0, duration_ns=1, dest_qp=5,
               dest_qp_choices=(0x2000, 2))
