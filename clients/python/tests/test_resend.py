"""A cancel whose first answer is lost: the controller cancelled, the client
did not hear it and resends, and the resend finds nothing live. That is the
cancel having worked. A NOT_FOUND without a lost answer stays an error. The
controller is a stand-in NDSP server on loopback whose first answer comes
after the client's deadline."""

import threading
import time
from concurrent import futures

import grpc
import pytest

from foresight_ndsp import NdspClient, NdspError
from foresight_ndsp._pb import ndsp_pb2 as pb
from foresight_ndsp._pb import ndsp_pb2_grpc as pb_grpc


class LateFirstAnswer(pb_grpc.DemandSignalingServicer):
    """Cancels on the first call but answers too late; then nothing is live."""

    def __init__(self, late: bool):
        self.late = late
        self.calls = 0
        self.lock = threading.Lock()

    def Cancel(self, request, context):
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first and self.late:
            time.sleep(1.0)
            return pb.CancelResponse(cancelled_reservation_ids=["r1"])
        context.abort(grpc.StatusCode.NOT_FOUND, 'demand_id: no live demand "d1" of tenant "acme"')


@pytest.fixture
def stand_in(request):
    servicer = LateFirstAnswer(late=request.param)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_DemandSignalingServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", servicer
    server.stop(grace=None)


@pytest.mark.parametrize("stand_in", [True], indirect=True)
def test_a_cancel_resent_after_a_lost_answer_is_done(stand_in):
    addr, servicer = stand_in
    # The same server twice: a resend is allowed (as to another replica).
    with NdspClient(f"{addr},{addr}", "acme", timeout_s=0.3) as client:
        assert client.cancel(demand_id="d1") == []
        assert client.already_cancelled and client.answer_lost
    assert servicer.calls == 2


@pytest.mark.parametrize("stand_in", [False], indirect=True)
def test_not_found_without_a_lost_answer_is_an_error(stand_in):
    addr, servicer = stand_in
    with NdspClient(f"{addr},{addr}", "acme", timeout_s=0.3) as client:
        with pytest.raises(NdspError) as err:
            client.cancel(demand_id="d1")
        assert err.value.code == grpc.StatusCode.NOT_FOUND
        assert not client.already_cancelled
    assert servicer.calls == 1
