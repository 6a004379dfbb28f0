//! Fuzzing NDSP validation: valid messages of every kind the controller
//! or a client validates are mutated, half at byte level (seeded:
//! `testkit::mutate`; most of these no longer decode) and half field by
//! field through the protocol's descriptor (edge numbers, unknown enum
//! values, bad strings, duplicated or cleared repeated fields, removed
//! sub-messages; these reach validation), then decoded and validated. No input may panic, and
//! every rejection must name a field that exists in the message (the whole
//! path, resolved against the protocol's descriptor) with a reason.
//!
//! `FORESIGHT_FUZZ_INPUTS` (default 20,000) and `FORESIGHT_FUZZ_SEED`
//! (default 1) set the run; the closing figures come from
//! `FORESIGHT_FUZZ_INPUTS=1000000 cargo test --release -p ndsp --test fuzz -- --nocapture`.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use ndsp::proto::{self, cancel_request, demand_signal, endpoint};
use ndsp::{Validate, ValidationError};
use prost::Message;
use prost_reflect::{
    Cardinality, DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor,
    ReflectMessage, Value,
};
use testkit::mutate::Mutator;
use testkit::requests::{demand, header, register, ring_allreduce};

const PACKAGE: &str = "foresight.ndsp.v1";

/// One kind of message: its name and how to decode and validate bytes.
struct Target {
    name: &'static str,
    corpus: Vec<Vec<u8>>,
    check: fn(&[u8]) -> Outcome,
}

enum Outcome {
    NotProtobuf,
    Valid,
    Rejected(ValidationError),
}

fn run<M: Message + Default + Validate>(bytes: &[u8]) -> Outcome {
    match M::decode(bytes) {
        Err(_) => Outcome::NotProtobuf,
        Ok(m) => match m.validate() {
            Ok(_) => Outcome::Valid,
            Err(e) => Outcome::Rejected(e),
        },
    }
}

fn target<M: Message + Default + Validate>(name: &'static str, corpus: Vec<M>) -> Target {
    Target {
        name,
        corpus: corpus.iter().map(Message::encode_to_vec).collect(),
        check: run::<M>,
    }
}

fn reservation() -> proto::Reservation {
    proto::Reservation {
        reservation_id: "r1/d0".into(),
        subject: Some(proto::reservation::Subject::DemandId("d0".into())),
        job_id: "job".into(),
        status: proto::ReservationStatus::Admitted as i32,
        reason: proto::ReasonCode::Unspecified as i32,
        advisory: String::new(),
        start_unix_ns: 1_000,
        end_unix_ns: 2_000,
        flows: vec![proto::FlowReservation {
            flow_id: "d0".into(),
            source_address: "10.0.1.1".into(),
            destination_address: "10.0.2.1".into(),
            source_rank: Some(0),
            destination_rank: Some(8),
            dest_qp: Some(0x100),
            status: proto::ReservationStatus::Admitted as i32,
            reason: proto::ReasonCode::Unspecified as i32,
            requested_bps: 10_000_000_000,
            accepted_bps: 10_000_000_000,
            start_unix_ns: 1_000,
            end_unix_ns: 2_000,
            sr_label_stack: vec![1003, 1002, 1001],
            hops: vec![proto::PathHop {
                node: "leaf1".into(),
                egress_port: 3,
            }],
            advisory: String::new(),
            udp_src_port: None,
        }],
        revision: 1,
        predicted: false,
    }
}

fn targets() -> Vec<Target> {
    let mut recurring = demand(
        "d1",
        "10.0.1.1",
        "10.0.2.1",
        0,
        1_000_000,
        10_000_000_000,
        Some(700),
    );
    recurring.recurrence = Some(proto::Recurrence {
        period_ns: 10_000_000,
        occurrences: 5,
    });
    let mut by_rank = demand("d2", "10.0.1.1", "10.0.2.1", 5, 1_000_000, 1_000_000, None);
    by_rank.job_id = "job".into();
    by_rank.source = Some(proto::Endpoint {
        address: Some(endpoint::Address::Rank(0)),
    });
    by_rank.start = Some(demand_signal::Start::StartUnixNs(1_900_000_000_000_000_000));
    let mut predicted = reservation();
    predicted.predicted = true;
    predicted.subject = Some(proto::reservation::Subject::DemandId("t5/job/4/0".into()));
    vec![
        target(
            "HandshakeRequest",
            vec![proto::HandshakeRequest {
                header: header(),
                client_name: "fuzz 1.0".into(),
            }],
        ),
        target(
            "RegisterTopologyRequest",
            vec![register("job", &["10.0.1.1", "10.0.2.1"])],
        ),
        target(
            "SubmitDemandRequest",
            vec![proto::SubmitDemandRequest {
                header: header(),
                reference_unix_ns: 0,
                demands: vec![
                    demand(
                        "d0",
                        "10.0.1.2",
                        "10.0.2.2",
                        0,
                        5_000_000,
                        85_000_000_000,
                        None,
                    ),
                    recurring,
                    by_rank,
                ],
            }],
        ),
        target(
            "SubmitCollectiveRequest",
            vec![ring_allreduce("ar", "job", 16, 2, 1_000_000, 10_000_000)],
        ),
        target(
            "CancelRequest",
            vec![
                proto::CancelRequest {
                    header: header(),
                    target: Some(cancel_request::Target::DemandId("d0".into())),
                },
                proto::CancelRequest {
                    header: header(),
                    target: Some(cancel_request::Target::JobId("job".into())),
                },
            ],
        ),
        target(
            "WatchEventsRequest",
            vec![proto::WatchEventsRequest {
                header: header(),
                job_ids: vec!["job".into()],
                telemetry_interval_ns: 100_000_000,
            }],
        ),
        target(
            "ListReservationsRequest",
            vec![proto::ListReservationsRequest {
                header: header(),
                job_id: "job".into(),
                page_size: 10,
                page_token: String::new(),
            }],
        ),
        target(
            "GetReservationRequest",
            vec![proto::GetReservationRequest {
                header: header(),
                reservation_id: "r1/d0".into(),
            }],
        ),
        target(
            "ReportDeviationRequest",
            vec![proto::ReportDeviationRequest {
                header: header(),
                reference_unix_ns: 0,
                deviation: Some(proto::WorkloadDeviation {
                    target: Some(proto::workload_deviation::Target::DemandId("d0".into())),
                    change: Some(proto::workload_deviation::Change::LateStart(
                        proto::StartChange {
                            start: Some(proto::start_change::Start::StartOffsetNs(5_000_000)),
                        },
                    )),
                    observed_unix_ns: 0,
                }),
            }],
        ),
        target(
            "WatchEvent",
            vec![proto::WatchEvent {
                sequence: 3,
                emitted_unix_ns: 1_000,
                event: Some(proto::watch_event::Event::Deviation(
                    proto::NetworkDeviation {
                        observed_unix_ns: 1_000,
                        affected_reservation_ids: vec!["r1/t5/job/4/0".into()],
                        kind: Some(proto::network_deviation::Kind::PredictionWithdrawn(
                            proto::PredictionWithdrawn {
                                job_id: "job".into(),
                                reason: "no iteration by the window".into(),
                            },
                        )),
                    },
                )),
            }],
        ),
        target("Reservation", vec![reservation(), predicted]),
        target(
            "SubmitDemandResponse",
            vec![proto::SubmitDemandResponse {
                reservations: vec![reservation()],
            }],
        ),
    ]
}

const STRINGS: [&str; 12] = [
    "",
    "x",
    "a/b",
    "job id",
    "\u{0}",
    "10.0.0.300",
    "255.255.255.255",
    "0.0.0.0",
    "::1",
    "é",
    "r1/d0",
    "t5/job/1/0",
];
const U64S: [u64; 8] = [
    0,
    1,
    2,
    u64::MAX,
    1 << 63,
    86_400_000_000_001,
    10_000_000_000_001,
    4097,
];
const I64S: [i64; 5] = [0, -1, i64::MIN, i64::MAX, 1];

/// A value at an edge for `field`'s type.
fn edge_value(field: &FieldDescriptor, m: &mut Mutator) -> Value {
    let u = U64S[m.below(U64S.len())];
    let i = I64S[m.below(I64S.len())];
    match field.kind() {
        Kind::String => {
            let s = STRINGS[m.below(STRINGS.len())];
            Value::String(if m.below(8) == 0 {
                s.repeat(300)
            } else {
                s.to_string()
            })
        }
        Kind::Bytes => Value::Bytes(vec![0xff; m.below(64)].into()),
        Kind::Bool => Value::Bool(m.below(2) == 0),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(u),
        Kind::Uint32 | Kind::Fixed32 => {
            Value::U32([0, 1, u32::MAX, 1 << 24, 16_777_215, 1_048_577, 4097, 65][m.below(8)])
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(i),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(i as i32),
        Kind::Enum(_) => Value::EnumNumber([0, 1, 2, 7, 99, -1, i32::MAX][m.below(7)]),
        Kind::Double => Value::F64([f64::NAN, f64::INFINITY, -1.0, 0.0][m.below(4)]),
        Kind::Float => Value::F32([f32::NAN, f32::INFINITY, -1.0, 0.0][m.below(4)]),
        Kind::Message(d) => Value::Message(DynamicMessage::new(d)),
    }
}

/// Change one field somewhere in `msg` (descending into sub-messages).
fn mutate_field(msg: &mut DynamicMessage, m: &mut Mutator, depth: usize) {
    let fields: Vec<FieldDescriptor> = msg.descriptor().fields().collect();
    if fields.is_empty() {
        return;
    }
    let field = fields[m.below(fields.len())].clone();
    let is_message = matches!(field.kind(), Kind::Message(_));
    if field.cardinality() == Cardinality::Repeated {
        let mut list = match msg.get_field(&field).into_owned() {
            Value::List(l) => l,
            _ => Vec::new(),
        };
        match m.below(5) {
            0 => list.clear(),
            1 if !list.is_empty() => {
                let v = list[m.below(list.len())].clone();
                list.push(v);
            }
            2 if !list.is_empty() && list.len() < 100 && depth == 0 && m.below(50) == 0 => {
                // A huge repeated field: the same element thousands of
                // times (once per input, at the top, to stay in memory).
                let v = list[m.below(list.len())].clone();
                list.extend(std::iter::repeat_n(v, 5000));
            }
            3 if !list.is_empty() && is_message && depth < 4 => {
                let i = m.below(list.len());
                if let Value::Message(inner) = &mut list[i] {
                    mutate_field(inner, m, depth + 1);
                }
            }
            _ => list.push(edge_value(&field, m)),
        }
        msg.set_field(&field, Value::List(list));
        return;
    }
    if is_message && msg.has_field(&field) && depth < 4 && m.below(3) != 0 {
        if let Value::Message(inner) = msg.get_field_mut(&field) {
            mutate_field(inner, m, depth + 1);
        }
        return;
    }
    if m.below(4) == 0 {
        msg.clear_field(&field);
    } else {
        msg.set_field(&field, edge_value(&field, m));
    }
}

/// Does `path` (e.g. `demands[2].source.rank`) name fields that exist,
/// segment by segment, starting at `message`? Its last segment may be a
/// oneof (a required choice left unset).
fn resolves(pool_message: &MessageDescriptor, path: &str) -> bool {
    let mut current = Some(pool_message.clone());
    for segment in path.split('.') {
        let name = segment.split('[').next().unwrap_or("");
        let Some(m) = current.take() else {
            return false;
        };
        let Some(field) = m.get_field_by_name(name) else {
            // A oneof ("target: is required") names no deeper field.
            return current.is_none()
                && m.oneofs().any(|o| o.name() == name)
                && segment == path.rsplit('.').next().unwrap_or("");
        };
        if let Kind::Message(inner) = field.kind() {
            current = Some(inner);
        }
    }
    true
}

#[test]
fn mutated_messages_never_panic_and_every_rejection_names_a_real_field() {
    let inputs: u64 = std::env::var("FORESIGHT_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let seed: u64 = std::env::var("FORESIGHT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let pool = DescriptorPool::decode(ndsp::FILE_DESCRIPTOR_SET).expect("descriptor set");
    let targets = targets();
    // The corpus itself is valid.
    for t in &targets {
        for c in &t.corpus {
            if let Outcome::Rejected(e) = (t.check)(c) {
                panic!("{}: the corpus is invalid: {e}", t.name);
            }
        }
    }
    let mut m = Mutator::new(seed);
    let mut counts: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    let mut fields: BTreeMap<String, u64> = BTreeMap::new();
    let started = std::time::Instant::now();
    for _ in 0..inputs {
        let t = &targets[m.below(targets.len())];
        let base = &t.corpus[m.below(t.corpus.len())];
        let other = &targets[m.below(targets.len())].corpus[0];
        let input = if m.below(2) == 0 {
            m.bytes(base, other)
        } else {
            let descriptor = pool
                .get_message_by_name(&format!("{PACKAGE}.{}", t.name))
                .expect("message in the descriptor");
            let mut msg =
                DynamicMessage::decode(descriptor, base.as_slice()).expect("corpus decodes");
            for _ in 0..=m.below(3) {
                mutate_field(&mut msg, &mut m, 0);
            }
            msg.encode_to_vec()
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| (t.check)(&input)))
            .unwrap_or_else(|_| panic!("{}: validation panicked on {input:02x?}", t.name));
        let c = counts.entry(t.name).or_default();
        match outcome {
            Outcome::NotProtobuf => c[0] += 1,
            Outcome::Valid => c[1] += 1,
            Outcome::Rejected(e) => {
                c[2] += 1;
                let descriptor = pool
                    .get_message_by_name(&format!("{PACKAGE}.{}", t.name))
                    .expect("message in the descriptor");
                assert!(
                    !e.reason.is_empty() && resolves(&descriptor, &e.field),
                    "{}: rejection does not name a field of the message: {e:?} (input {input:02x?})",
                    t.name
                );
                let top = e.field.split(['.', '[']).next().unwrap_or("").to_string();
                *fields.entry(format!("{}.{top}", t.name)).or_default() += 1;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{inputs} mutated inputs (seed {seed}) in {secs:.1} s, {:.0}/s; no panic",
        inputs as f64 / secs
    );
    println!(
        "{:<26} {:>10} {:>10} {:>10}",
        "message", "not protobuf", "valid", "rejected"
    );
    for (name, [bad, ok, rejected]) in &counts {
        println!("{name:<26} {bad:>10} {ok:>10} {rejected:>10}");
    }
    let rejected: u64 = counts.values().map(|c| c[2]).sum();
    assert!(
        rejected > inputs / 4,
        "too few inputs reached validation ({rejected}): the mutator is not exercising it"
    );
    println!(
        "distinct top-level fields named in rejections: {}",
        fields.len()
    );
}
