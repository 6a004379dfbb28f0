//! Link down/up on BMv2: the operator takes a fabric link down through
//! the admin endpoint (what `foresight link down` sends); the reservation
//! on it moves to another path on the switches, the ECMP group of the
//! leaf loses the dead next hop, watchers get LinkDown then the
//! re-planned reservation, the link state survives a controller restart,
//! and `up` restores the group. Bad link names change nothing.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use ndsp::proto;
use ndsp::types::{NetworkChange, ValidatedWatchEvent, WatchEventBody};
use ndsp::Validate;
use p4rt::proto::p4::v1 as p4;

const MS: u64 = 1_000_000;

/// Routes of a switch: prefix -> (member, group).
async fn routes(reader: &mut Reader, switch: &str) -> BTreeMap<String, p4::table_action::Type> {
    let info = reader.info().await.clone();
    let read = reader.sessions[switch]
        .read(vec![p4rt::entity::all_table_entries(
            &info,
            "FsIngress.routing.ipv4_lpm",
        )
        .unwrap()])
        .await
        .unwrap();
    read.into_iter()
        .filter_map(|e| match e.entity {
            Some(p4::entity::Entity::TableEntry(t)) => {
                let spec = p4rt::EntrySpec::from_entry(&info, &t).unwrap();
                Some((spec.matches["dst_addr"].clone(), t.action?.r#type?))
            }
            _ => None,
        })
        .collect()
}

/// ECMP groups of a switch: id -> member ids (= ports).
async fn groups(reader: &mut Reader, switch: &str) -> BTreeMap<u32, Vec<u32>> {
    let info = reader.info().await.clone();
    let profile = info
        .action_profile("FsIngress.routing.ecmp_selector")
        .unwrap()
        .preamble
        .as_ref()
        .unwrap()
        .id;
    let read = reader.sessions[switch]
        .read(vec![p4::ActionProfileGroup {
            action_profile_id: profile,
            ..Default::default()
        }
        .into()])
        .await
        .unwrap();
    read.into_iter()
        .filter_map(|e| match e.entity {
            Some(p4::entity::Entity::ActionProfileGroup(g)) => {
                let mut m: Vec<u32> = g.members.iter().map(|m| m.member_id).collect();
                m.sort();
                Some((g.group_id, m))
            }
            _ => None,
        })
        .collect()
}

async fn next_event(stream: &mut tonic::Streaming<proto::WatchEvent>) -> ValidatedWatchEvent {
    tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("an event within 5 s")
        .unwrap()
        .expect("stream open")
        .validate()
        .expect("a valid event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_link_moves_reservations_and_ecmp_off_it_and_comes_back() {
    let _serial = serial().await;
    let Some(fabric) = Fabric::start("link state test") else {
        return;
    };
    let controller = fabric.controller(0);
    let mut reader = fabric.reader().await;
    let mut client = controller.client().await;
    let mut watch = client
        .watch_events(proto::WatchEventsRequest {
            header: header(),
            job_ids: vec![],
            telemetry_interval_ns: 0,
        })
        .await
        .unwrap()
        .into_inner();

    let r = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![demand(
                "d1",
                "10.0.1.1",
                "10.0.2.1",
                0,
                600_000 * MS,
                40_000_000_000,
                Some(700),
            )],
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap()
        .remove(0);
    let uplink = r.flows[0].hops[0].egress_port;
    assert_eq!(r.flows[0].hops[0].node, "leaf1");
    let sr_before = reader.entries(&["FsIngress.sr.reservation"]).await["leaf1"].clone();
    assert_eq!(sr_before.len(), 1);
    // leaf1 reaches leaf2's subnet through a group of both uplinks.
    let g = groups(&mut reader, "leaf1").await;
    assert_eq!(g.values().cloned().collect::<Vec<_>>(), vec![vec![3, 4]]);

    // Bad names: a clear error, nothing changes anywhere.
    let everything = reader.everything().await;
    for (path, why) in [
        ("/v1/links/leaf9:3/down", "no switch \"leaf9\""),
        ("/v1/links/leaf1:1/down", "connects host h1"),
        ("/v1/links/leaf1:9/down", "nothing is attached"),
        ("/v1/links/leaf1:x/down", "must be a number"),
    ] {
        let (code, body) = controller.post_json(path);
        assert_eq!(code, 400, "{path}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(why),
            "{path}: {body}"
        );
    }
    assert_eq!(
        reader.everything().await,
        everything,
        "bad input changed the switches"
    );
    assert!(
        controller.get_json("/v1/status")["controller"]["links_down"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Down.
    let (code, body) = controller.post_json(&format!("/v1/links/leaf1:{uplink}/down"));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["changed"], true);
    assert_eq!(body["replanned"][0]["id"], r.reservation_id.as_str());
    assert_eq!(body["replanned"][0]["status"], "admitted");
    let other = 7 - uplink; // leaf1's uplinks are ports 3 and 4
    let sr_after = reader.entries(&["FsIngress.sr.reservation"]).await["leaf1"].clone();
    assert_eq!(sr_after.len(), 1);
    assert_ne!(sr_after, sr_before, "the SR entry moved to the other spine");
    let label = 1000 + other; // adjacency label of leaf1's other uplink
    assert!(
        sr_after
            .iter()
            .next()
            .unwrap()
            .contains(&format!("label0={label}")),
        "{sr_after:?}"
    );
    assert!(
        groups(&mut reader, "leaf1").await.is_empty(),
        "the group lost the dead member"
    );
    let via = routes(&mut reader, "leaf1").await;
    assert_eq!(
        via["10.0.2.0/24"],
        p4::table_action::Type::ActionProfileMemberId(other),
        "leaf2's subnet through the surviving uplink only"
    );
    // The spine on the dead link no longer routes to leaf1.
    let spine = if uplink == 3 { "spine1" } else { "spine2" };
    assert!(!routes(&mut reader, spine).await.contains_key("10.0.1.0/24"));

    let ev = next_event(&mut watch).await;
    let WatchEventBody::Deviation(d) = ev.body else {
        panic!("{ev:?}")
    };
    match &d.change {
        NetworkChange::LinkDown(l) => {
            assert_eq!((l.from_node.as_str(), l.from_port), ("leaf1", uplink));
            assert_eq!(l.to_node, spine);
        }
        other => panic!("want link_down first: {other:?}"),
    }
    assert_eq!(d.affected_reservation_ids, vec![r.reservation_id.clone()]);
    let ev = next_event(&mut watch).await;
    let WatchEventBody::Deviation(d) = ev.body else {
        panic!("{ev:?}")
    };
    let NetworkChange::ReservationChanged(changed) = d.change else {
        panic!("{d:?}")
    };
    assert_eq!(changed.revision, 2);
    assert_eq!(changed.flows[0].hops[0].egress_port, other);

    // The link state survives a restart.
    drop(watch);
    controller.kill();
    let controller = fabric.controller(0);
    let status = controller.get_json("/v1/status");
    assert_eq!(
        status["controller"]["links_down"][0],
        format!("leaf1:{uplink} <-> {spine}:1"),
        "{status}"
    );
    assert!(groups(&mut reader, "leaf1").await.is_empty());
    for sw in ["leaf1", "leaf2", "spine1", "spine2"] {
        let drift = &controller.get_json(&format!("/v1/entries/{sw}"))["drift"];
        for k in ["missing", "unexpected", "different"] {
            assert!(drift[k].as_array().unwrap().is_empty(), "{sw} {k}: {drift}");
        }
    }

    // Up (named by the spine's end): the group is back.
    let mut client = controller.client().await;
    let mut watch = client
        .watch_events(proto::WatchEventsRequest {
            header: header(),
            job_ids: vec![],
            telemetry_interval_ns: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let (code, body) = controller.post_json(&format!("/v1/links/{spine}:1/up"));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["changed"], true);
    let g = groups(&mut reader, "leaf1").await;
    assert_eq!(g.values().cloned().collect::<Vec<_>>(), vec![vec![3, 4]]);
    assert!(routes(&mut reader, spine).await.contains_key("10.0.1.0/24"));
    let ev = next_event(&mut watch).await;
    let WatchEventBody::Deviation(d) = ev.body else {
        panic!("{ev:?}")
    };
    assert!(matches!(d.change, NetworkChange::LinkUp(_)), "{d:?}");
    let (code, body) = controller.post_json(&format!("/v1/links/{spine}:1/up"));
    assert_eq!((code, &body["changed"]), (200, &serde_json::json!(false)));
}
