//! The generated client and server over a real gRPC connection: malformed
//! requests come back INVALID_ARGUMENT naming the field, and the handler
//! never sees them; valid ones reach it; watch events stream back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ndsp::proto::demand_signaling_client::DemandSignalingClient;
use ndsp::proto::demand_signaling_server::{DemandSignaling, DemandSignalingServer};
use ndsp::proto::{self, demand_signal, endpoint};
use ndsp::types::*;
use ndsp::validate::FIELD_METADATA_KEY;
use ndsp::Validate;
use tonic::{Request, Response, Status};

/// A stand-in controller: validates, counts what it applied, and answers.
#[derive(Default)]
struct Mock {
    applied: Arc<AtomicUsize>,
}

fn host_of(e: Endpoint) -> std::net::Ipv4Addr {
    match e {
        Endpoint::Host(a) => a,
        Endpoint::Rank(_) => unreachable!("this test sends host endpoints"),
    }
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this test"))
}

#[tonic::async_trait]
impl DemandSignaling for Mock {
    async fn handshake(
        &self,
        request: Request<proto::HandshakeRequest>,
    ) -> Result<Response<proto::HandshakeResponse>, Status> {
        request.get_ref().validate()?;
        Ok(Response::new(
            (&ServerHello {
                server_version: ndsp::PROTOCOL_VERSION,
                server_time_unix_ns: 1,
                supported_collective_kinds: vec![CollectiveKind::RingAllReduce],
                max_demands_per_request: 4096,
                max_label_stack_depth: 4,
            })
                .into(),
        ))
    }

    async fn register_topology(
        &self,
        _: Request<proto::RegisterTopologyRequest>,
    ) -> Result<Response<proto::RegisterTopologyResponse>, Status> {
        unimplemented()
    }

    async fn submit_demand(
        &self,
        request: Request<proto::SubmitDemandRequest>,
    ) -> Result<Response<proto::SubmitDemandResponse>, Status> {
        let batch = request.get_ref().validate()?;
        self.applied
            .fetch_add(batch.demands.len(), Ordering::SeqCst);
        let reservations = batch
            .demands
            .iter()
            .enumerate()
            .map(|(i, d)| {
                (&ValidatedReservation {
                    reservation_id: format!("r-{i}"),
                    subject: ReservationSubject::Demand(d.demand_id.clone()),
                    job_id: d.job_id.clone(),
                    status: ReservationStatus::FallbackEcmp,
                    reason: ReasonCode::NoPath,
                    advisory: Some("mock controller pins no paths".into()),
                    start_unix_ns: 1,
                    end_unix_ns: 2,
                    flows: vec![FlowReservation {
                        flow_id: d.demand_id.clone(),
                        source_address: host_of(d.source),
                        destination_address: host_of(d.destination),
                        source_rank: None,
                        destination_rank: None,
                        dest_qp: d.dest_qp,
                        status: ReservationStatus::FallbackEcmp,
                        reason: ReasonCode::NoPath,
                        requested_bps: d.rate_bps(),
                        accepted_bps: 0,
                        start_unix_ns: 1,
                        end_unix_ns: 2,
                        sr_label_stack: vec![],
                        hops: vec![],
                        advisory: None,
                        udp_src_port: None,
                    }],
                    revision: 1,
                    predicted: false,
                })
                    .into()
            })
            .collect();
        Ok(Response::new(proto::SubmitDemandResponse { reservations }))
    }

    async fn submit_collective(
        &self,
        _: Request<proto::SubmitCollectiveRequest>,
    ) -> Result<Response<proto::SubmitCollectiveResponse>, Status> {
        unimplemented()
    }

    async fn cancel(
        &self,
        _: Request<proto::CancelRequest>,
    ) -> Result<Response<proto::CancelResponse>, Status> {
        unimplemented()
    }

    async fn report_deviation(
        &self,
        _: Request<proto::ReportDeviationRequest>,
    ) -> Result<Response<proto::ReportDeviationResponse>, Status> {
        unimplemented()
    }

    type WatchEventsStream =
        tokio_stream::Iter<std::vec::IntoIter<Result<proto::WatchEvent, Status>>>;

    async fn watch_events(
        &self,
        request: Request<proto::WatchEventsRequest>,
    ) -> Result<Response<Self::WatchEventsStream>, Status> {
        request.get_ref().validate()?;
        let link = LinkId {
            from_node: "leaf1".into(),
            from_port: 1,
            to_node: "spine1".into(),
            to_port: 1,
        };
        let events = (1..=2)
            .map(|seq| {
                Ok((&ValidatedWatchEvent {
                    sequence: seq,
                    emitted_unix_ns: 100 + seq,
                    body: WatchEventBody::Deviation(NetworkDeviation {
                        observed_unix_ns: 100,
                        affected_reservation_ids: vec![],
                        change: if seq == 1 {
                            NetworkChange::LinkDown(link.clone())
                        } else {
                            NetworkChange::LinkUp(link.clone())
                        },
                    }),
                })
                    .into())
            })
            .collect::<Vec<_>>();
        Ok(Response::new(tokio_stream::iter(events)))
    }

    async fn get_reservation(
        &self,
        _: Request<proto::GetReservationRequest>,
    ) -> Result<Response<proto::GetReservationResponse>, Status> {
        unimplemented()
    }

    async fn list_reservations(
        &self,
        _: Request<proto::ListReservationsRequest>,
    ) -> Result<Response<proto::ListReservationsResponse>, Status> {
        unimplemented()
    }
}

fn header(major: u32) -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(proto::ProtocolVersion { major, minor: 0 }),
        tenant: "acme".into(),
    })
}

fn demand(id: &str) -> proto::DemandSignal {
    let host = |a: &str| {
        Some(proto::Endpoint {
            address: Some(endpoint::Address::HostAddress(a.into())),
        })
    };
    proto::DemandSignal {
        demand_id: id.into(),
        job_id: String::new(),
        source: host("10.0.1.1"),
        destination: host("10.0.2.1"),
        start: Some(demand_signal::Start::StartOffsetNs(1_000_000)),
        size_bytes: 1 << 20,
        pacing: Some(demand_signal::Pacing::DurationNs(1_000_000)),
        priority: proto::PriorityClass::Standard as i32,
        elasticity: proto::Elasticity::Elastic as i32,
        deadline: None,
        dest_qp: None,
        recurrence: None,
        dest_qp_choices: None,
    }
}

#[tokio::test]
async fn grpc_rejects_malformed_and_serves_valid() {
    let incoming =
        tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let addr = incoming.local_addr().unwrap();
    let mock = Mock::default();
    let applied = mock.applied.clone();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(DemandSignalingServer::new(mock))
            .serve_with_incoming(incoming),
    );
    let mut client = DemandSignalingClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");

    let hello = client
        .handshake(proto::HandshakeRequest {
            header: header(1),
            client_name: "grpc test".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert_eq!(hello.server_version, ndsp::PROTOCOL_VERSION);

    // A batch with one bad demand: rejected whole, nothing applied.
    let mut bad = demand("b");
    bad.destination = Some(proto::Endpoint {
        address: Some(endpoint::Address::HostAddress("10.0.0.300".into())),
    });
    let status = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(1),
            reference_unix_ns: 0,
            demands: vec![demand("a"), bad],
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "demands[1].destination.host_address: \"10.0.0.300\" is not an IPv4 address"
    );
    assert_eq!(
        status.metadata().get(FIELD_METADATA_KEY).unwrap(),
        "demands[1].destination.host_address"
    );
    assert_eq!(applied.load(Ordering::SeqCst), 0);

    // Another major version.
    let status = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(2),
            reference_unix_ns: 0,
            demands: vec![demand("a")],
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status
        .message()
        .starts_with("header.protocol_version.major:"));
    assert_eq!(applied.load(Ordering::SeqCst), 0);

    // A valid batch reaches the handler; the response validates.
    let reservations = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(1),
            reference_unix_ns: 0,
            demands: vec![demand("a"), demand("b")],
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert_eq!(reservations.len(), 2);
    assert_eq!(
        reservations[1].subject,
        ReservationSubject::Demand("b".into())
    );
    assert_eq!(applied.load(Ordering::SeqCst), 2);

    // Server streaming.
    let mut stream = client
        .watch_events(proto::WatchEventsRequest {
            header: header(1),
            job_ids: vec![],
            telemetry_interval_ns: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    while let Some(event) = stream.message().await.unwrap() {
        seen.push(event.validate().unwrap());
    }
    assert_eq!(seen.len(), 2);
    assert!(matches!(
        &seen[0].body,
        WatchEventBody::Deviation(NetworkDeviation {
            change: NetworkChange::LinkDown(_),
            ..
        })
    ));

    server.abort();
}
