//! `foresight cancel` when the answer to its first attempt is lost: the
//! controller cancelled, the CLI did not hear it and resends, and the
//! resend finds nothing live. That is the cancel having worked, not an
//! error. A NOT_FOUND without a lost answer stays an error. The
//! controller here is a stand-in NDSP server on loopback that loses the
//! first answer on purpose (answers CANCELLED, as a broken call does).

use std::pin::Pin;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ndsp::proto::demand_signaling_server::{DemandSignaling, DemandSignalingServer};
use ndsp::proto::{self, WatchEvent};
use tonic::{Request, Response, Status};

/// Answers only Cancel: the first `lose` calls lose their answer, then
/// nothing is live.
struct LosesAnswers {
    lose: usize,
    calls: Arc<AtomicUsize>,
}

type Events = Pin<Box<dyn futures::Stream<Item = Result<WatchEvent, Status>> + Send>>;

fn not_here<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this test"))
}

#[tonic::async_trait]
impl DemandSignaling for LosesAnswers {
    type WatchEventsStream = Events;

    async fn cancel(
        &self,
        _: Request<proto::CancelRequest>,
    ) -> Result<Response<proto::CancelResponse>, Status> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.lose {
            return Err(Status::cancelled("the answer was lost on the way"));
        }
        Err(Status::not_found(
            "demand_id: no live demand \"d1\" of tenant \"acme\"",
        ))
    }

    async fn handshake(
        &self,
        _: Request<proto::HandshakeRequest>,
    ) -> Result<Response<proto::HandshakeResponse>, Status> {
        not_here()
    }
    async fn register_topology(
        &self,
        _: Request<proto::RegisterTopologyRequest>,
    ) -> Result<Response<proto::RegisterTopologyResponse>, Status> {
        not_here()
    }
    async fn submit_demand(
        &self,
        _: Request<proto::SubmitDemandRequest>,
    ) -> Result<Response<proto::SubmitDemandResponse>, Status> {
        not_here()
    }
    async fn submit_collective(
        &self,
        _: Request<proto::SubmitCollectiveRequest>,
    ) -> Result<Response<proto::SubmitCollectiveResponse>, Status> {
        not_here()
    }
    async fn report_deviation(
        &self,
        _: Request<proto::ReportDeviationRequest>,
    ) -> Result<Response<proto::ReportDeviationResponse>, Status> {
        not_here()
    }
    async fn watch_events(
        &self,
        _: Request<proto::WatchEventsRequest>,
    ) -> Result<Response<Events>, Status> {
        not_here()
    }
    async fn get_reservation(
        &self,
        _: Request<proto::GetReservationRequest>,
    ) -> Result<Response<proto::GetReservationResponse>, Status> {
        not_here()
    }
    async fn list_reservations(
        &self,
        _: Request<proto::ListReservationsRequest>,
    ) -> Result<Response<proto::ListReservationsResponse>, Status> {
        not_here()
    }
}

/// Serve the stand-in on a loopback port; its address and call counter.
async fn serve(lose: usize) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let calls = Arc::new(AtomicUsize::new(0));
    let service = LosesAnswers {
        lose,
        calls: calls.clone(),
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(DemandSignalingServer::new(service))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (addr, calls)
}

/// `foresight cancel --demand d1 --json` against `addr` (run off the runtime).
async fn cancel(addr: String) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_foresight"))
            .args(["cancel", "--demand", "d1", "--tenant", "acme", "--json"])
            .args(["--controller", &addr])
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_resent_after_a_lost_answer_is_done() {
    let (addr, calls) = serve(1).await;
    let out = cancel(addr).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(answer["already_cancelled"], true);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "sent once, resent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_without_a_lost_answer_is_an_error() {
    let (addr, calls) = serve(0).await;
    let out = cancel(addr).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no live demand \"d1\""), "{stderr}");
    assert!(!stderr.contains("answer was lost"), "{stderr}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
