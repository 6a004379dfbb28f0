"""NdspClient and controller replicas on etcd: a call sent to a follower
reaches the leader, and a resubmission after the leader is SIGKILLed gets
the same reservation from the replica that takes over."""

import pytest

from foresight_ndsp import Demand, JobTopology, NdspClient, RankEndpoint
from harness import Controller, Etcd, find_binary, find_etcd

S = 1_000_000_000


@pytest.fixture
def cluster(tmp_path):
    binary, etcd_binary = find_binary(), find_etcd()
    if binary is None or etcd_binary is None:
        pytest.skip("SKIPPED: needs the foresight binary and etcd (Debian etcd-server, or FORESIGHT_ETCD)")
    etcd = Etcd(etcd_binary, tmp_path)
    replicas = []
    for name in ("r0", "r1"):
        (tmp_path / name).mkdir()
        replicas.append(Controller(binary, tmp_path / name))
    args = ["--etcd", etcd.endpoint, "--lease-ttl-s", "1", "--replica"]
    try:
        replicas[0].start(extra_args=args + ["r0"])  # ready: it leads
        replicas[1].start(extra_args=args + ["r1"], wait_ready=False)
        yield replicas
    finally:
        for r in replicas:
            r.stop()
        etcd.stop()


def test_calls_follow_the_replicas_to_the_leader(cluster, tenant):
    leader, follower = cluster
    job = JobTopology("job-ha", [RankEndpoint(i, ip) for i, ip in enumerate(leader.hosts)])
    demand = Demand("d-ha", 0, 2, 1_000_000, start_offset_ns=60 * S, duration_ns=60 * S, job_id="job-ha")
    # The follower first: it names the leader, and the call goes there.
    with NdspClient(f"{follower.target},{leader.target}", tenant) as client:
        client.register_job(job)
        first = client.submit_demands([demand], reference_unix_ns=client.now_unix_ns())[0]
        assert client.failovers >= 1
        assert client.target == leader.target
        leader.stop()  # SIGKILL
        # Retried until the follower's campaign wins (the 1 s lease expires).
        again = client.submit_demands([demand])[0]
        assert client.target == follower.target
        assert again.reservation_id == first.reservation_id
        assert [r.reservation_id for r in client.list_reservations(job_id="job-ha")] == [first.reservation_id]


def test_one_unreachable_target_fails_at_once(tenant):
    # One target and no replica naming a leader: no failover wait.
    with NdspClient("127.0.0.1:9", tenant, timeout_s=1.0) as client:
        with pytest.raises(Exception):
            client.list_reservations()
        assert client.failovers == 0
