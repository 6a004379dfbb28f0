//! The vertical slice on real BMv2: start `simple_switch_grpc`, become
//! primary, push the `ipv4_forward` pipeline, write an entry, read it back;
//! plus arbitration between two clients, batched-write error mapping and
//! reconnecting after a switch restart.
//!
//! Skipped (with a line saying so) when BMv2 is not installed.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use p4::set_forwarding_pipeline_config_request::Action as PipelineAction;
use p4rt::proto::p4::v1 as p4;
use p4rt::{P4Info, Switch, SwitchOptions, TableEntryBuilder};

fn artifact(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../p4src/build")
        .join(name)
}

fn tools() -> Option<bmv2::Toolchain> {
    testkit::skip::bmv2("p4rt BMv2 tests")
}

fn pipeline() -> (P4Info, Vec<u8>) {
    let info = P4Info::load(artifact("ipv4_forward.p4info.binpb")).expect("committed P4Info");
    let json = std::fs::read(artifact("ipv4_forward.json")).expect("committed BMv2 JSON");
    (info, json)
}

fn route(info: &P4Info, prefix: Ipv4Addr, len: u32, port: u32) -> p4::TableEntry {
    TableEntryBuilder::new(info, "ipv4_lpm")
        .unwrap()
        .lpm("dst_addr", prefix, len)
        .unwrap()
        .action(
            "forward",
            &[
                ("port", port.into()),
                ("src_mac", [0, 0, 0, 0, 0, 1].into()),
                ("dst_mac", [0, 0, 0, 0, 0, 2].into()),
            ],
        )
        .unwrap()
        .build()
        .unwrap()
}

async fn primary(addr: &str, device_id: u64, election_id: u128) -> Switch {
    let options = SwitchOptions::new(addr, device_id).election_id(election_id);
    let switch = Switch::connect_with_retry(options, Duration::from_secs(10))
        .await
        .unwrap();
    switch.wait_primary(Duration::from_secs(2)).await.unwrap();
    switch
}

#[tokio::test]
async fn push_write_read_back() {
    let Some(tools) = tools() else { return };
    let bmv2 = bmv2::start_switches(&tools, 1).unwrap();
    let (info, json) = pipeline();
    let switch = primary(&bmv2[0].grpc_addr(), bmv2[0].device_id(), 1).await;
    assert!(switch.capabilities().await.unwrap().starts_with("1."));

    switch
        .set_pipeline(&info, json, PipelineAction::VerifyAndCommit)
        .await
        .unwrap();
    let got = switch
        .get_pipeline(p4::get_forwarding_pipeline_config_request::ResponseType::P4infoAndCookie)
        .await
        .unwrap()
        .expect("a pipeline is installed");
    assert_eq!(got.p4info.as_ref(), Some(info.raw()));

    let entry = route(&info, Ipv4Addr::new(10, 0, 2, 0), 24, 2);
    switch
        .apply(p4::update::Type::Insert, [entry.clone().into()], 1)
        .await
        .unwrap();
    let read = switch
        .read(vec![
            p4rt::entity::all_table_entries(&info, "ipv4_lpm").unwrap()
        ])
        .await
        .unwrap();
    let read: Vec<p4::TableEntry> = read
        .into_iter()
        .filter_map(|e| match e.entity {
            Some(p4::entity::Entity::TableEntry(t)) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(read, vec![entry]);
    switch.shutdown().await;
}

#[tokio::test]
async fn batch_failures_map_to_the_failing_update() {
    let Some(tools) = tools() else { return };
    let bmv2 = bmv2::start_switches(&tools, 1).unwrap();
    let (info, json) = pipeline();
    let switch = primary(&bmv2[0].grpc_addr(), 0, 1).await;
    switch
        .set_pipeline(&info, json, PipelineAction::VerifyAndCommit)
        .await
        .unwrap();

    let mut entities: Vec<p4::Entity> = (0..10u8)
        .map(|i| route(&info, Ipv4Addr::new(10, 1, i, 0), 24, 1).into())
        .collect();
    entities[7] = entities[2].clone(); // duplicate insert -> ALREADY_EXISTS
    let err = switch
        .apply(p4::update::Type::Insert, entities.clone(), 4)
        .await
        .unwrap_err();
    assert_eq!(err.failures.len(), 1, "{err}");
    assert_eq!(err.failures[0].index, 7, "{err}");
    assert_eq!(
        err.failures[0].code,
        tonic::Code::AlreadyExists as i32,
        "{err}"
    );
    assert_eq!(
        err.not_sent, 2,
        "batches of 4: updates 8 and 9 come after the failing batch"
    );

    // Streamed with 4 in flight: the duplicate of #2 (now at #10, in the
    // last batch) is the only failure and keeps its index.
    let more: Vec<p4::Update> = (20..30u8)
        .map(|i| route(&info, Ipv4Addr::new(10, 1, i, 0), 24, 1).into())
        .chain(std::iter::once(entities[2].clone()))
        .map(|e| p4rt::switch::update(p4::update::Type::Insert, e))
        .collect();
    let err = switch.write_streamed(more, 2, 4).await.unwrap_err();
    assert_eq!(err.failures.len(), 1, "{err}");
    assert_eq!(err.failures[0].index, 10, "{err}");
    assert_eq!(err.not_sent, 0, "{err}");
    let delete_routes = |range: std::ops::Range<u8>| {
        range.map(|i| -> p4::Entity { route(&info, Ipv4Addr::new(10, 1, i, 0), 24, 1).into() })
    };
    switch
        .apply(p4::update::Type::Delete, delete_routes(20..30), 1)
        .await
        .unwrap();

    // A failure in the first batch stops new batches: what was sent is on
    // the switch, what was not is counted, nothing else.
    let count = || async {
        switch
            .read(vec![
                p4rt::entity::all_table_entries(&info, "ipv4_lpm").unwrap()
            ])
            .await
            .unwrap()
            .len()
    };
    let before = count().await;
    let first_fails: Vec<p4::Update> = std::iter::once(entities[2].clone())
        .chain((40..50u8).map(|i| route(&info, Ipv4Addr::new(10, 1, i, 0), 24, 1).into()))
        .map(|e| p4rt::switch::update(p4::update::Type::Insert, e))
        .collect();
    // One batch in flight, so the failure is seen before anything else is
    // sent (with more in flight, batches already on the wire may finish
    // first: the server answers them in any order).
    let err = switch
        .write_streamed(first_fails.clone(), 2, 1)
        .await
        .unwrap_err();
    assert_eq!(err.failures.len(), 1, "{err}");
    assert_eq!(err.failures[0].index, 0, "{err}");
    assert!(
        err.failures[0].entity.starts_with("table entry"),
        "the failure names its entry: {err}"
    );
    assert_eq!(err.not_sent, 9, "{err}");
    assert_eq!(
        count().await,
        before + (11 - err.not_sent - 1),
        "every sent insert but the duplicate is held ({} not sent)",
        err.not_sent
    );
    let sent = (11 - err.not_sent - 1) as u8;
    switch
        .apply(p4::update::Type::Delete, delete_routes(40..40 + sent), 1)
        .await
        .unwrap();

    // Two in flight: how much goes out before the failure is seen depends
    // on timing, but what was not sent is still counted exactly.
    let err = switch.write_streamed(first_fails, 2, 2).await.unwrap_err();
    assert_eq!(err.failures.len(), 1, "{err}");
    assert_eq!(err.failures[0].index, 0, "{err}");
    assert!(err.not_sent <= 9, "{err}");
    assert_eq!(count().await, before + (10 - err.not_sent), "{err}");
    let sent = (10 - err.not_sent) as u8;
    switch
        .apply(p4::update::Type::Delete, delete_routes(40..40 + sent), 1)
        .await
        .unwrap();

    // Re-applying everything with insert-or-modify is idempotent.
    switch.insert_or_modify(entities, 3).await.unwrap();
    let all = switch
        .read(vec![
            p4rt::entity::all_table_entries(&info, "ipv4_lpm").unwrap()
        ])
        .await
        .unwrap();
    assert_eq!(all.len(), 9);
    switch.shutdown().await;
}

#[tokio::test]
async fn only_the_primary_writes_and_the_backup_takes_over() {
    let Some(tools) = tools() else { return };
    let bmv2 = bmv2::start_switches(&tools, 1).unwrap();
    let addr = bmv2[0].grpc_addr();
    let (info, json) = pipeline();

    let high = primary(&addr, 0, 20).await;
    high.set_pipeline(&info, json, PipelineAction::VerifyAndCommit)
        .await
        .unwrap();
    let low = Switch::connect(SwitchOptions::new(&addr, 0).election_id(10))
        .await
        .unwrap();
    assert!(!low.is_primary());
    assert_eq!(low.mastership().borrow().primary_election_id, Some(20));

    let entry: p4::Entity = route(&info, Ipv4Addr::new(10, 9, 0, 0), 16, 3).into();
    let err = low
        .apply(p4::update::Type::Insert, [entry.clone()], 1)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("PermissionDenied"), "{err}");

    high.shutdown().await;
    low.wait_primary(Duration::from_secs(5)).await.unwrap();
    low.apply(p4::update::Type::Insert, [entry], 1)
        .await
        .unwrap();
    low.shutdown().await;
}

#[tokio::test]
async fn reconnects_after_the_switch_restarts() {
    let Some(tools) = tools() else { return };
    let mut bmv2 = bmv2::start_switches(&tools, 1).unwrap();
    let (info, json) = pipeline();
    let switch = primary(&bmv2[0].grpc_addr(), 0, 1).await;
    switch
        .set_pipeline(&info, json.clone(), PipelineAction::VerifyAndCommit)
        .await
        .unwrap();

    let mut mastership = switch.mastership();
    bmv2[0].restart().unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        mastership.wait_for(|m| !m.connected),
    )
    .await
    .expect("the client notices the switch went away")
    .unwrap();

    let switch = switch.reconnect(Duration::from_secs(10)).await.unwrap();
    switch.wait_primary(Duration::from_secs(2)).await.unwrap();
    assert!(
        switch
            .get_pipeline(p4::get_forwarding_pipeline_config_request::ResponseType::P4infoAndCookie)
            .await
            .map(|c| c.and_then(|c| c.p4info))
            .unwrap_or(None)
            .is_none(),
        "a restarted BMv2 has no pipeline"
    );
    switch
        .set_pipeline(&info, json, PipelineAction::VerifyAndCommit)
        .await
        .unwrap();
    let entry: p4::Entity = route(&info, Ipv4Addr::new(10, 0, 0, 0), 8, 1).into();
    switch
        .apply(p4::update::Type::Insert, [entry], 1)
        .await
        .unwrap();
    switch.shutdown().await;
}

#[tokio::test]
async fn one_process_drives_many_switches() {
    let Some(tools) = tools() else { return };
    let bmv2 = bmv2::start_switches(&tools, 3).unwrap();
    let (info, json) = pipeline();
    let mut tasks = Vec::new();
    for (i, sw) in bmv2.iter().enumerate() {
        let (addr, device_id, info, json) =
            (sw.grpc_addr(), sw.device_id(), info.clone(), json.clone());
        tasks.push(tokio::spawn(async move {
            let switch = primary(&addr, device_id, 1).await;
            switch
                .set_pipeline(&info, json, PipelineAction::VerifyAndCommit)
                .await
                .unwrap();
            let entry: p4::Entity = route(&info, Ipv4Addr::new(10, i as u8, 0, 0), 16, 1).into();
            switch
                .apply(p4::update::Type::Insert, [entry], 1)
                .await
                .unwrap();
            let n = switch
                .read(vec![
                    p4rt::entity::all_table_entries(&info, "ipv4_lpm").unwrap()
                ])
                .await
                .unwrap()
                .len();
            switch.shutdown().await;
            n
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), 1);
    }
}
