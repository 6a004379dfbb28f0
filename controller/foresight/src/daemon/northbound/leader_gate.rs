//! NDSP on every replica: who asks is checked first (`identity`, with
//! mutual TLS); then the leader's service once this replica leads;
//! until then every request is `UNAVAILABLE`, naming the leader in the
//! message and in the `foresight-leader` metadata (its NDSP address) so
//! clients retry there. Demand ids make such retries idempotent.

use std::sync::{Arc, OnceLock};

use ndsp::proto::{self, demand_signaling_server::DemandSignaling};
use tonic::{Request, Response, Status};

use super::identity::{authorize, Mtls};
use super::service::{EventStream, Ndsp};
use crate::daemon::persistence::ha::Replica;

/// Response metadata of a follower: the leader's NDSP address.
pub const LEADER_METADATA: &str = "foresight-leader";

#[derive(Default)]
pub struct LeaderGate {
    /// With mutual TLS: who may act for which tenant.
    mtls: Option<Mtls>,
    leader: OnceLock<Ndsp>,
    /// Set while campaigning: where followers find the leader.
    replica: OnceLock<Arc<Replica>>,
}

impl LeaderGate {
    pub fn new(mtls: Option<Mtls>) -> LeaderGate {
        LeaderGate {
            mtls,
            ..LeaderGate::default()
        }
    }

    /// This replica leads from now on.
    pub fn promote(&self, service: Ndsp) {
        let _ = self.leader.set(service);
    }

    /// This replica follows the leader `replica` elects.
    pub fn follow(&self, replica: Arc<Replica>) {
        let _ = self.replica.set(replica);
    }

    async fn not_leader(&self) -> Status {
        let leader = match self.replica.get() {
            Some(r) => r.leader().await,
            None => None,
        };
        match leader {
            Some(l) => {
                let mut status = Status::unavailable(format!(
                    "this replica is not the leader; the leader is {} at {}",
                    l.replica, l.ndsp
                ));
                if let Ok(v) = l.ndsp.parse() {
                    status.metadata_mut().insert(LEADER_METADATA, v);
                }
                status
            }
            None => Status::unavailable("no leader elected yet; retry shortly"),
        }
    }
}

/// Each RPC: the leader's answer, or where the leader is. (The whole
/// impl is generated so that `async_trait` sees the methods.)
macro_rules! gated {
    ($($rpc:ident($req:ty) -> $resp:ty;)*) => {
        #[tonic::async_trait]
        impl DemandSignaling for LeaderGate {
            type WatchEventsStream = EventStream;
            $(
                async fn $rpc(&self, request: Request<$req>) -> Result<Response<$resp>, Status> {
                    authorize(self.mtls.as_ref(), &request)?;
                    match self.leader.get() {
                        Some(service) => service.$rpc(request).await,
                        None => Err(self.not_leader().await),
                    }
                }
            )*
        }
    };
}

gated! {
    handshake(proto::HandshakeRequest) -> proto::HandshakeResponse;
    register_topology(proto::RegisterTopologyRequest) -> proto::RegisterTopologyResponse;
    submit_demand(proto::SubmitDemandRequest) -> proto::SubmitDemandResponse;
    submit_collective(proto::SubmitCollectiveRequest) -> proto::SubmitCollectiveResponse;
    cancel(proto::CancelRequest) -> proto::CancelResponse;
    report_deviation(proto::ReportDeviationRequest) -> proto::ReportDeviationResponse;
    watch_events(proto::WatchEventsRequest) -> EventStream;
    get_reservation(proto::GetReservationRequest) -> proto::GetReservationResponse;
    list_reservations(proto::ListReservationsRequest) -> proto::ListReservationsResponse;
}
