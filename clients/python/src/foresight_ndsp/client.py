"""A blocking NDSP client: one method per RPC, typed in and out.

Use it for set-up and queries (handshake, register, list, cancel, watch).
A training loop should announce through `BackgroundSender`, which calls the
submit methods from its own thread so that the step never waits.
"""

from __future__ import annotations

import time
from typing import Iterator, List, Optional, Sequence

import grpc

from . import convert
from ._pb import ndsp_pb2 as pb
from ._pb import ndsp_pb2_grpc as pb_grpc
from .errors import NdspError
from .types import Collective, Demand, JobTopology, Registration, Reservation, ServerInfo, WatchEvent

# Reconnect quickly after a controller restart (gRPC's default backoff grows
# to two minutes, which would hold announcements back long after it is up).
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


# A follower replica's answer names the leader's NDSP address here.
LEADER_METADATA = "foresight-leader"


class NdspClient:
    """Talks NDSP to a controller for one tenant.

    `target` is host:port, or the replicas of a highly available controller
    (comma-separated): a follower answers UNAVAILABLE naming the leader, and
    the call is retried there (or at the next replica) for up to
    `failover_s`. Retrying is safe: demand and collective ids make a
    submission idempotent. With one target and no leader named, UNAVAILABLE
    is raised at once (the caller decides; `BackgroundSender` drops).
    """

    def __init__(
        self,
        target: str,
        tenant: str,
        *,
        timeout_s: float = 5.0,
        channel: Optional[grpc.Channel] = None,
        failover_s: float = 15.0,
    ):
        if not tenant:
            raise ValueError("tenant: required (1-128 characters from A-Z a-z 0-9 . _ : -)")
        self.targets = [t.strip() for t in target.split(",") if t.strip()]
        if not self.targets:
            raise ValueError(f"target {target!r}: want host:port[,host:port...]")
        self.target = self.targets[0]
        self.tenant = tenant
        self.timeout_s = timeout_s
        self.failover_s = failover_s
        self._own_channel = channel is None
        self._channel = channel or grpc.insecure_channel(self.target, options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.DemandSignalingStub(self._channel)
        self.clock_offset_ns = 0  # controller clock - local clock, set by handshake()
        self.failovers = 0  # calls sent again to another replica
        # The last call was resent after an attempt whose answer was lost
        # (no answer in time, a connection that broke): that attempt may
        # have been carried out.
        self.answer_lost = False
        # The last cancel found nothing live after a lost answer: the lost
        # attempt cancelled it.
        self.already_cancelled = False

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "NdspClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def now_unix_ns(self) -> int:
        """The controller's clock as estimated from the last handshake."""
        return time.time_ns() + self.clock_offset_ns

    def _call(self, name: str, request, timeout_s: Optional[float] = None):
        deadline = time.monotonic() + self.failover_s
        next_target = 1
        self.answer_lost = False
        while True:
            try:
                return getattr(self._stub, name)(request, timeout=timeout_s or self.timeout_s)
            except grpc.RpcError as err:
                leader = self._leader_named(err)
                # DEADLINE_EXCEEDED: a paused replica accepts but never answers.
                retry = (
                    (err.code() == grpc.StatusCode.UNAVAILABLE
                     or (err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and len(self.targets) > 1))
                    and self._own_channel
                    and (leader is not None or len(self.targets) > 1)
                    and time.monotonic() < deadline
                )
                if not retry:
                    raise NdspError.from_rpc_error(name, err) from None
                self.answer_lost |= self._answer_lost(err, leader)
            if leader is None:
                leader = self.targets[next_target % len(self.targets)]
                next_target += 1
            time.sleep(0.05)
            self._reconnect(leader)
            self.failovers += 1

    @staticmethod
    def _answer_lost(err: grpc.RpcError, leader: Optional[str]) -> bool:
        """Whether a failed attempt may have reached a leader: not a
        follower's answer (it names the leader, or says none is elected)
        and not a connection that never opened."""
        if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return True
        details = (err.details() or "").lower()
        return leader is None and "no leader elected" not in details and "failed to connect" not in details

    @staticmethod
    def _leader_named(err: grpc.RpcError) -> Optional[str]:
        trailing = getattr(err, "trailing_metadata", None)
        for key, value in (trailing() if trailing else None) or ():
            if key == LEADER_METADATA:
                return value
        return None

    def _reconnect(self, target: str) -> None:
        """Send the next calls to `target` (another replica)."""
        self._channel.close()
        self.target = target
        self._channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.DemandSignalingStub(self._channel)

    def _header(self) -> pb.RequestHeader:
        return convert.header(self.tenant)

    # ------------------------------------------------------------------ RPCs

    def handshake(self, client_name: str = "foresight-ndsp (python)") -> ServerInfo:
        """Compare versions and estimate the controller's clock offset."""
        t0 = time.time_ns()
        r = self._call("Handshake", pb.HandshakeRequest(header=self._header(), client_name=client_name))
        t1 = time.time_ns()
        if r.server_version.major != convert.PROTOCOL_MAJOR:
            raise NdspError(
                "Handshake",
                grpc.StatusCode.FAILED_PRECONDITION,
                f"server_version.major: controller speaks NDSP {r.server_version.major}.{r.server_version.minor}, "
                f"this client {convert.PROTOCOL_MAJOR}.{convert.PROTOCOL_MINOR}",
                "server_version.major",
            )
        self.clock_offset_ns = r.server_time_unix_ns - (t0 + t1) // 2
        return ServerInfo(
            version=(r.server_version.major, r.server_version.minor),
            server_time_unix_ns=r.server_time_unix_ns,
            clock_offset_ns=self.clock_offset_ns,
            supported_collective_kinds=convert.collective_kinds_from_pb(r.supported_collective_kinds),
            max_demands_per_request=r.max_demands_per_request,
            max_label_stack_depth=r.max_label_stack_depth,
        )

    def register_job(self, topology: JobTopology) -> Registration:
        """Register or replace the job's rank map (rank -> host address)."""
        req = pb.RegisterTopologyRequest(header=self._header(), topology=convert.topology_to_pb(topology))
        r = self._call("RegisterTopology", req)
        return Registration(r.job_id, r.registered_ranks, r.generation, tuple(r.warnings))

    def demand_request(self, demands: Sequence[Demand], reference_unix_ns: int = 0) -> pb.SubmitDemandRequest:
        """The request submit_demands sends; built once so a retry is byte-identical."""
        return pb.SubmitDemandRequest(
            header=self._header(),
            reference_unix_ns=reference_unix_ns,
            demands=[convert.demand_to_pb(d) for d in demands],
        )

    def collective_request(self, collective: Collective, reference_unix_ns: int = 0) -> pb.SubmitCollectiveRequest:
        return pb.SubmitCollectiveRequest(
            header=self._header(),
            reference_unix_ns=reference_unix_ns,
            collective=convert.collective_to_pb(collective),
        )

    def submit_demands(self, demands: Sequence[Demand], reference_unix_ns: int = 0) -> List[Reservation]:
        """One reservation per demand, in order. Resubmitting identical demands
        returns the existing reservations (safe to retry)."""
        return self.send_demand_request(self.demand_request(demands, reference_unix_ns))

    def send_demand_request(self, request: pb.SubmitDemandRequest, timeout_s: Optional[float] = None) -> List[Reservation]:
        r = self._call("SubmitDemand", request, timeout_s)
        return [convert.reservation_from_pb(x) for x in r.reservations]

    def submit_collective(self, collective: Collective, reference_unix_ns: int = 0) -> Reservation:
        """The reservation covering the collective's expanded flows (safe to retry)."""
        return self.send_collective_request(self.collective_request(collective, reference_unix_ns))

    def send_collective_request(self, request: pb.SubmitCollectiveRequest, timeout_s: Optional[float] = None) -> Reservation:
        r = self._call("SubmitCollective", request, timeout_s)
        return convert.reservation_from_pb(r.reservation)

    def cancel(
        self,
        *,
        demand_id: Optional[str] = None,
        collective_id: Optional[str] = None,
        reservation_id: Optional[str] = None,
        job_id: Optional[str] = None,
    ) -> List[str]:
        """Cancel exactly one target; returns the released reservation ids.

        Resent after a lost answer (a failover), a cancel that finds nothing
        live had worked the first time: it returns [] and sets
        `already_cancelled`. Otherwise nothing live is NOT_FOUND."""
        targets = {k: v for k, v in dict(demand_id=demand_id, collective_id=collective_id,
                                         reservation_id=reservation_id, job_id=job_id).items() if v is not None}
        if len(targets) != 1:
            raise ValueError(f"cancel: give exactly one of demand_id, collective_id, reservation_id, job_id (got {sorted(targets) or 'none'})")
        self.already_cancelled = False
        try:
            r = self._call("Cancel", pb.CancelRequest(header=self._header(), **targets))
        except NdspError as err:
            if err.code == grpc.StatusCode.NOT_FOUND and self.answer_lost:
                self.already_cancelled = True
                return []
            raise
        return list(r.cancelled_reservation_ids)

    def get_reservation(self, reservation_id: str) -> Reservation:
        r = self._call("GetReservation", pb.GetReservationRequest(header=self._header(), reservation_id=reservation_id))
        return convert.reservation_from_pb(r.reservation)

    def list_reservations(self, job_id: str = "", page_size: int = 0) -> List[Reservation]:
        """Every reservation of the tenant (or of one job), all pages."""
        out: List[Reservation] = []
        token = ""
        while True:
            req = pb.ListReservationsRequest(header=self._header(), job_id=job_id, page_size=page_size, page_token=token)
            r = self._call("ListReservations", req)
            out.extend(convert.reservation_from_pb(x) for x in r.reservations)
            token = r.next_page_token
            if not token:
                return out

    def watch_events(self, job_ids: Sequence[str] = (), telemetry_interval_ns: int = 0) -> Iterator[WatchEvent]:
        """Telemetry snapshots and deviations until the caller stops iterating
        (or calls .cancel() on the returned iterator's `call`)."""
        req = pb.WatchEventsRequest(header=self._header(), job_ids=list(job_ids), telemetry_interval_ns=telemetry_interval_ns)
        call = self._stub.WatchEvents(req)
        return _EventStream(call)


class _EventStream:
    """Iterator over a WatchEvents stream that raises NdspError, and can be cancelled."""

    def __init__(self, call):
        self.call = call

    def __iter__(self):
        return self

    def __next__(self) -> WatchEvent:
        try:
            return convert.watch_event_from_pb(next(self.call))
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.CANCELLED:
                raise StopIteration from None
            raise NdspError.from_rpc_error("WatchEvents", err) from None

    def cancel(self) -> None:
        self.call.cancel()
