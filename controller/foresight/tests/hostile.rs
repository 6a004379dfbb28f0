//! A running controller under 10,000 malformed or hostile NDSP requests on
//! loopback: bytes that are not the message, valid protobuf that breaks the
//! rules (unknown enum values, out-of-range times, duplicate ids, 5,000
//! repeated elements, an oversized message), and requests that validate
//! but must be refused (a live id with other contents, an unknown job or
//! reservation, a stale announcement). Every one is refused; the
//! controller stays up; its reservations, its state file and every switch
//! entry are exactly what they were. On BMv2 (SKIPPED without it).

mod common;

use std::collections::BTreeMap;

use common::*;
use ndsp::proto::{self, cancel_request, demand_signal};
use ndsp::Validate;
use prost::bytes::{Buf, BufMut};
use prost::Message;
use testkit::mutate::Mutator;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;

/// Sends and receives raw bytes, so a request can be anything.
#[derive(Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

const SERVICE: &str = "/foresight.ndsp.v1.DemandSignaling/";

/// One hostile request: the RPC and its body.
type Hostile = (&'static str, Vec<u8>);

/// A valid request of one RPC and how to tell a valid body of it.
type Seed = (&'static str, Vec<u8>, fn(&[u8]) -> bool);

/// Valid requests of each RPC, the mutation corpus.
fn corpus() -> Vec<Seed> {
    fn valid<M: Message + Default + Validate>(b: &[u8]) -> bool {
        M::decode(b).is_ok_and(|m| m.validate().is_ok())
    }
    vec![
        (
            "SubmitDemand",
            proto::SubmitDemandRequest {
                header: header(),
                reference_unix_ns: 0,
                demands: vec![demand(
                    "x1",
                    "10.0.1.1",
                    "10.0.2.2",
                    1_000_000_000,
                    10_000_000,
                    1_000_000_000,
                    None,
                )],
            }
            .encode_to_vec(),
            valid::<proto::SubmitDemandRequest>,
        ),
        (
            "SubmitCollective",
            ring_allreduce("x2", "train", 16, 2, 1_000_000_000, 10_000_000).encode_to_vec(),
            valid::<proto::SubmitCollectiveRequest>,
        ),
        (
            "RegisterTopology",
            register("x3", &["10.0.1.1", "10.0.2.1"]).encode_to_vec(),
            valid::<proto::RegisterTopologyRequest>,
        ),
        (
            "Cancel",
            proto::CancelRequest {
                header: header(),
                target: Some(cancel_request::Target::DemandId("d0".into())),
            }
            .encode_to_vec(),
            valid::<proto::CancelRequest>,
        ),
        (
            "ListReservations",
            proto::ListReservationsRequest {
                header: header(),
                ..Default::default()
            }
            .encode_to_vec(),
            valid::<proto::ListReservationsRequest>,
        ),
    ]
}

/// Requests that validate as messages but that the controller must refuse
/// without changing anything.
fn refused_by_the_controller(live: &proto::DemandSignal) -> Vec<Hostile> {
    let mut other = live.clone();
    other.size_bytes += 1;
    let mut stale = demand("old", "10.0.1.1", "10.0.2.2", 0, 1_000_000, 1_000_000, None);
    stale.start = Some(demand_signal::Start::StartUnixNs(1_000_000_000));
    let submit = |d: proto::DemandSignal| proto::SubmitDemandRequest {
        header: header(),
        reference_unix_ns: 0,
        demands: vec![d],
    };
    vec![
        ("SubmitDemand", submit(other).encode_to_vec()),
        ("SubmitDemand", submit(stale).encode_to_vec()),
        (
            "SubmitCollective",
            ring_allreduce("c9", "nobody", 16, 2, 1_000_000_000, 10_000_000).encode_to_vec(),
        ),
        (
            "Cancel",
            proto::CancelRequest {
                header: header(),
                target: Some(cancel_request::Target::ReservationId("r999/none".into())),
            }
            .encode_to_vec(),
        ),
    ]
}

/// Valid protobuf that breaks the protocol's rules.
fn rule_breakers() -> Vec<Hostile> {
    let base = || {
        demand(
            "y", "10.0.1.1", "10.0.2.2", 1_000_000, 10_000_000, 1_000_000, None,
        )
    };
    let submit = |demands: Vec<proto::DemandSignal>| {
        proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands,
        }
        .encode_to_vec()
    };
    let mut unknown_enum = base();
    unknown_enum.priority = 99;
    let mut far = base();
    far.start = Some(demand_signal::Start::StartOffsetNs(
        25 * 3600 * 1_000_000_000,
    ));
    let mut wrong_version =
        proto::SubmitDemandRequest::decode(submit(vec![base()]).as_slice()).unwrap();
    wrong_version.header.as_mut().unwrap().protocol_version =
        Some(proto::ProtocolVersion { major: 2, minor: 0 });
    vec![
        ("SubmitDemand", submit(vec![unknown_enum])),
        ("SubmitDemand", submit(vec![far])),
        ("SubmitDemand", submit(vec![base(), base()])),
        ("SubmitDemand", submit(vec![base(); 5000])),
        ("SubmitDemand", wrong_version.encode_to_vec()),
        // Over gRPC's 4 MiB message limit.
        ("SubmitDemand", vec![0x0a; 5 << 20]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_hostile_requests_change_nothing() {
    let _serial = serial().await;
    let Some(fabric) = Fabric::start("hostile NDSP requests") else {
        return;
    };
    let controller = fabric.controller(100);
    let mut client = controller.client().await;
    client
        .register_topology(register("train", &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap();
    let live = demand(
        "d0",
        "10.0.1.2",
        "10.0.2.2",
        0,
        60_000_000_000,
        10_000_000_000,
        Some(700),
    );
    client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![live.clone()],
        })
        .await
        .unwrap();
    client
        .submit_collective(ring_allreduce(
            "ar",
            "train",
            16,
            2,
            60_000_000_000,
            1_000_000_000,
        ))
        .await
        .unwrap();
    let list = |c: &mut ndsp::proto::demand_signaling_client::DemandSignalingClient<_>| {
        let mut c = c.clone();
        async move {
            c.list_reservations(proto::ListReservationsRequest {
                header: header(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
        }
    };
    let mut reader = fabric.reader().await;
    let before = (
        list(&mut client).await,
        fabric.saved_state(),
        reader.everything().await,
    );

    let channel = tonic::transport::Endpoint::new(format!("http://{}", controller.ndsp))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let corpus = corpus();
    let mut fixed = refused_by_the_controller(&live);
    fixed.extend(rule_breakers());
    let mut m = Mutator::new(7);
    let mut codes: BTreeMap<String, u64> = BTreeMap::new();
    let (mut sent, mut skipped_valid) = (0u32, 0u32);
    let started = std::time::Instant::now();
    while sent < 10_000 {
        let (rpc, body) = if (sent as usize) < fixed.len() {
            fixed[sent as usize].clone()
        } else {
            let (rpc, base, valid) = &corpus[m.below(corpus.len())];
            let other = &corpus[m.below(corpus.len())].1;
            let body = m.bytes(base, other);
            if valid(&body) {
                // A mutation that happens to be a valid request would be
                // served, legitimately; only hostile ones are sent.
                skipped_valid += 1;
                continue;
            }
            (*rpc, body)
        };
        grpc.ready().await.unwrap();
        let path = PathAndQuery::try_from(format!("{SERVICE}{rpc}")).unwrap();
        let r = grpc.unary(tonic::Request::new(body), path, Raw).await;
        let code = match r {
            Ok(_) => panic!("request {sent} ({rpc}) was accepted"),
            Err(s) => format!("{:?}", s.code()),
        };
        *codes.entry(code).or_default() += 1;
        sent += 1;
    }
    println!(
        "{sent} hostile requests in {:.1} s ({skipped_valid} valid mutations not sent): {codes:?}",
        started.elapsed().as_secs_f64()
    );

    // Still serving, and nothing changed anywhere.
    client
        .handshake(proto::HandshakeRequest {
            header: header(),
            ..Default::default()
        })
        .await
        .expect("the controller still answers");
    let after = (
        list(&mut client).await,
        fabric.saved_state(),
        reader.everything().await,
    );
    assert_eq!(before.0, after.0, "reservations changed");
    assert!(before.1 == after.1, "the state file changed");
    assert_eq!(before.2, after.2, "switch entries changed");
    assert!(
        codes.contains_key("InvalidArgument")
            && codes.contains_key("AlreadyExists")
            && codes.contains_key("NotFound"),
        "{codes:?}"
    );
    controller.kill();
}
