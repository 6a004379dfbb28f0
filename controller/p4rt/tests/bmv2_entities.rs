//! Every entity kind and stream message of the client, round-tripped
//! through real BMv2 with the `p4rt_features` program (no data-plane
//! interfaces needed: packet-out to the CPU port loops back as packet-in).
//!
//! Skipped (with a line saying so) when BMv2 is not installed.

use std::path::PathBuf;
use std::time::Duration;

use p4::set_forwarding_pipeline_config_request::Action as PipelineAction;
use p4rt::entity;
use p4rt::proto::p4::v1 as p4;
use p4rt::{P4Info, StreamEvent, Switch, SwitchOptions, TableEntryBuilder, Value};

const CPU_PORT: u32 = bmv2::DEFAULT_CPU_PORT;

struct Fixture {
    _bmv2: Vec<bmv2::Bmv2Switch>,
    switch: Switch,
    info: P4Info,
}

async fn fixture() -> Option<Fixture> {
    let tools = testkit::skip::bmv2("p4rt BMv2 entity tests")?;
    let build = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    let info = P4Info::load(build.join("p4rt_features.p4info.binpb")).unwrap();
    let json = std::fs::read(build.join("p4rt_features.json")).unwrap();
    let bmv2 = bmv2::start_switches(&tools, 1).unwrap();
    let options = SwitchOptions::new(bmv2[0].grpc_addr(), 0);
    let switch = Switch::connect_with_retry(options, Duration::from_secs(10))
        .await
        .unwrap();
    switch.wait_primary(Duration::from_secs(2)).await.unwrap();
    switch
        .set_pipeline(&info, json, PipelineAction::VerifyAndCommit)
        .await
        .unwrap();
    Some(Fixture {
        _bmv2: bmv2,
        switch,
        info,
    })
}

fn table_entries(entities: Vec<p4::Entity>) -> Vec<p4::TableEntry> {
    entities
        .into_iter()
        .filter_map(|e| match e.entity {
            Some(p4::entity::Entity::TableEntry(t)) => Some(t),
            _ => None,
        })
        .collect()
}

fn acl_entry(info: &P4Info, priority: i32) -> p4::TableEntry {
    TableEntryBuilder::new(info, "acl")
        .unwrap()
        .ternary("src_addr", [0, 0, 0, 0, 0, 7], [0xff; 6])
        .unwrap()
        .range("ether_type", 0x0800u32, 0x08ffu32)
        .unwrap()
        .optional("ingress_port", 3u32)
        .unwrap()
        .priority(priority)
        .action("acl_permit", &[("tag", 99u32.into())])
        .unwrap()
        .build()
        .unwrap()
}

#[tokio::test]
async fn ternary_range_optional_modify_delete_and_direct_counter() {
    let Some(f) = fixture().await else { return };
    use p4::update::Type;
    let entry = acl_entry(&f.info, 10);
    f.switch
        .apply(Type::Insert, [entry.clone().into()], 1)
        .await
        .unwrap();
    let read = table_entries(
        f.switch
            .read(vec![entity::all_table_entries(&f.info, "acl").unwrap()])
            .await
            .unwrap(),
    );
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].r#match, entry.r#match);
    assert_eq!(read[0].priority, 10);

    // Modify the action parameter; read it back.
    let mut modified = entry.clone();
    modified.action = Some(p4::TableAction {
        r#type: Some(p4::table_action::Type::Action(
            entity::action(&f.info, "acl_permit", &[("tag", 7u32.into())]).unwrap(),
        )),
    });
    f.switch
        .apply(Type::Modify, [modified.clone().into()], 1)
        .await
        .unwrap();
    let read = table_entries(
        f.switch
            .read(vec![entity::all_table_entries(&f.info, "acl").unwrap()])
            .await
            .unwrap(),
    );
    assert_eq!(read[0].action, modified.action);

    // Direct counter of the entry reads back (zero: no traffic).
    let counters = f
        .switch
        .read(vec![entity::direct_counter(entry.clone()).into()])
        .await
        .unwrap();
    match &counters[0].entity {
        Some(p4::entity::Entity::DirectCounterEntry(c)) => {
            assert_eq!(c.data.unwrap_or_default().packet_count, 0)
        }
        other => panic!("expected a direct counter, got {other:?}"),
    }

    f.switch
        .apply(Type::Delete, [entry.into()], 1)
        .await
        .unwrap();
    assert!(f
        .switch
        .read(vec![entity::all_table_entries(&f.info, "acl").unwrap()])
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn action_selector_members_and_groups() {
    let Some(f) = fixture().await else { return };
    use p4::update::Type;
    let members: Vec<p4::Entity> = (1..=4u32)
        .map(|m| {
            entity::action_profile_member(
                &f.info,
                "ecmp_selector",
                m,
                "set_nexthop",
                &[("port", m.into()), ("dst_mac", Value::from(u64::from(m)))],
            )
            .unwrap()
            .into()
        })
        .collect();
    f.switch.apply(Type::Insert, members, 100).await.unwrap();
    let group = entity::action_profile_group(
        &f.info,
        "ecmp_selector",
        7,
        &[(1, 1), (2, 1), (3, 1), (4, 1)],
    )
    .unwrap();
    f.switch
        .apply(Type::Insert, [group.clone().into()], 1)
        .await
        .unwrap();
    let entry = TableEntryBuilder::new(&f.info, "ecmp")
        .unwrap()
        .exact("dst_addr", [0, 0, 0, 0, 0, 9])
        .unwrap()
        .group(7)
        .build()
        .unwrap();
    f.switch
        .apply(Type::Insert, [entry.clone().into()], 1)
        .await
        .unwrap();

    let profile_id = f
        .info
        .action_profile("ecmp_selector")
        .unwrap()
        .preamble
        .as_ref()
        .unwrap()
        .id;
    let read = f
        .switch
        .read(vec![
            p4::ActionProfileMember {
                action_profile_id: profile_id,
                ..Default::default()
            }
            .into(),
            p4::ActionProfileGroup {
                action_profile_id: profile_id,
                ..Default::default()
            }
            .into(),
        ])
        .await
        .unwrap();
    let mut member_ids = Vec::new();
    let mut groups = Vec::new();
    for e in read {
        match e.entity {
            Some(p4::entity::Entity::ActionProfileMember(m)) => member_ids.push(m.member_id),
            Some(p4::entity::Entity::ActionProfileGroup(g)) => groups.push(g),
            other => panic!("unexpected {other:?}"),
        }
    }
    member_ids.sort();
    assert_eq!(member_ids, vec![1, 2, 3, 4]);
    assert_eq!(groups.len(), 1);
    let mut got: Vec<u32> = groups[0].members.iter().map(|m| m.member_id).collect();
    got.sort();
    assert_eq!(got, vec![1, 2, 3, 4]);
    let read = table_entries(
        f.switch
            .read(vec![entity::all_table_entries(&f.info, "ecmp").unwrap()])
            .await
            .unwrap(),
    );
    assert_eq!(read, vec![entry]);
}

#[tokio::test]
async fn counters_registers_meters_and_replication() {
    let Some(f) = fixture().await else { return };
    use p4::update::Type;
    // Register: BMv2's P4Runtime server (PI) implements neither register
    // writes nor reads; the write must come back as that update's
    // UNIMPLEMENTED failure, mapped to the register.
    let cell = entity::register_value(&f.info, "scratch", 5, 0xdead_beefu32).unwrap();
    let err = f
        .switch
        .apply(Type::Modify, [cell.into()], 1)
        .await
        .unwrap_err();
    assert_eq!(err.failures.len(), 1, "{err}");
    assert_eq!(
        err.failures[0].code,
        tonic::Code::Unimplemented as i32,
        "{err}"
    );
    assert!(err.failures[0].entity.starts_with("register"), "{err}");
    assert!(
        entity::register_value(&f.info, "scratch", 64, 1u32).is_err(),
        "index past the end"
    );
    assert!(
        entity::register_value(&f.info, "scratch", 1, 1u64 << 32).is_err(),
        "value too wide"
    );

    // Indirect counter: all 64 cells come back.
    let all = f
        .switch
        .read(vec![entity::counter(&f.info, "port_counter", None)
            .unwrap()
            .into()])
        .await
        .unwrap();
    assert_eq!(all.len(), 64);

    // Meter: configure a cell, read the configuration back.
    let config = p4::MeterConfig {
        cir: 100,
        cburst: 10,
        pir: 200,
        pburst: 20,
        eburst: 0,
    };
    let meter = entity::meter(&f.info, "port_meter", 3, config).unwrap();
    f.switch
        .apply(Type::Modify, [meter.into()], 1)
        .await
        .unwrap();
    let read = f
        .switch
        .read(vec![p4::MeterEntry {
            meter_id: f
                .info
                .meter("port_meter")
                .unwrap()
                .preamble
                .as_ref()
                .unwrap()
                .id,
            index: Some(p4::Index { index: 3 }),
            ..Default::default()
        }
        .into()])
        .await
        .unwrap();
    match &read[0].entity {
        Some(p4::entity::Entity::MeterEntry(m)) => {
            let got = m.config.unwrap_or_default();
            assert_eq!((got.cir, got.pir), (100, 200));
        }
        other => panic!("expected a meter, got {other:?}"),
    }

    // Multicast group and clone session: insert and read back.
    f.switch
        .apply(
            Type::Insert,
            [
                entity::multicast_group(1, &[(1, 0), (2, 0), (3, 0)]),
                entity::clone_session(5, &[(CPU_PORT, 0)], 0),
            ],
            10,
        )
        .await
        .unwrap();
    let read = f
        .switch
        .read(vec![
            entity::multicast_group(1, &[]),
            entity::clone_session(5, &[], 0),
        ])
        .await
        .unwrap();
    assert_eq!(read.len(), 2, "{read:?}");
}

#[tokio::test]
async fn packet_out_loops_back_as_packet_in_and_raises_a_digest() {
    let Some(f) = fixture().await else { return };
    use p4::update::Type;
    let digest = entity::digest(&f.info, "learn_t", 0, 1).unwrap();
    f.switch
        .apply(Type::Insert, [digest.into()], 1)
        .await
        .unwrap();

    let out_meta = f.info.packet_metadata("packet_out").unwrap();
    let egress_id = out_meta
        .metadata
        .iter()
        .find(|m| m.name == "egress_port")
        .unwrap()
        .id;
    let mut frame = vec![0xff; 6];
    frame.extend([0x02, 0, 0, 0, 0, 0x42]); // source MAC the digest must report
    frame.extend([0x88, 0xb5]);
    frame.extend(b"foresight");
    f.switch
        .send_packet(p4::PacketOut {
            payload: frame.clone(),
            metadata: vec![p4::PacketMetadata {
                metadata_id: egress_id,
                value: p4rt::bytestring::encode_u128(CPU_PORT.into(), 9, "egress_port").unwrap(),
            }],
        })
        .await
        .unwrap();

    let in_meta = f.info.packet_metadata("packet_in").unwrap();
    let ingress_id = in_meta
        .metadata
        .iter()
        .find(|m| m.name == "ingress_port")
        .unwrap()
        .id;
    let (mut got_packet, mut got_digest) = (false, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !(got_packet && got_digest) {
        let event = tokio::time::timeout_at(deadline, f.switch.next_event())
            .await
            .expect("stream events in time");
        match event.expect("stream open") {
            StreamEvent::PacketIn(packet) => {
                assert_eq!(packet.payload, frame);
                let port = packet
                    .metadata
                    .iter()
                    .find(|m| m.metadata_id == ingress_id)
                    .unwrap();
                assert_eq!(
                    p4rt::bytestring::decode_u128(&port.value),
                    Some(u128::from(CPU_PORT))
                );
                got_packet = true;
            }
            StreamEvent::Digest(list) => {
                let Some(p4::p4_data::Data::Struct(fields)) = &list.data[0].data else {
                    panic!("digest data is a struct: {list:?}")
                };
                let Some(p4::p4_data::Data::Bitstring(mac)) = &fields.members[0].data else {
                    panic!()
                };
                assert_eq!(p4rt::bytestring::decode_u128(mac), Some(0x0200_0000_0042));
                f.switch
                    .ack_digest(list.digest_id, list.list_id)
                    .await
                    .unwrap();
                got_digest = true;
            }
            other => panic!("unexpected stream event {other:?}"),
        }
    }
}

#[tokio::test]
async fn idle_timeout_notification_arrives() {
    let Some(f) = fixture().await else { return };
    let mut entry = acl_entry(&f.info, 5);
    entry.idle_timeout_ns = 100_000_000;
    f.switch
        .apply(p4::update::Type::Insert, [entry.clone().into()], 1)
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), f.switch.next_event())
        .await
        .expect("notification within 10 s")
        .expect("stream open");
    match event {
        StreamEvent::IdleTimeout(n) => assert_eq!(n.table_entry[0].r#match, entry.r#match),
        other => panic!("expected an idle timeout, got {other:?}"),
    }
}
