//! Per-tenant limits on a running controller (its switches are down: no
//! BMv2 needed): a tenant over its live reservations, over its request
//! rate, or sending an oversized request is refused with
//! RESOURCE_EXHAUSTED (OUT_OF_RANGE for the size) naming the limit, and
//! nothing changes; another tenant is not affected.

mod common;

use common::*;
use ndsp::proto::{self, cancel_request};

fn as_tenant(tenant: &str, mut h: Option<proto::RequestHeader>) -> Option<proto::RequestHeader> {
    h.as_mut().unwrap().tenant = tenant.into();
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_are_held_to_their_limits() {
    let dir = tempfile::tempdir().unwrap();
    let switches = common::unreachable_switches(dir.path());
    let controller = Controller::spawn(
        dir.path(),
        &switches,
        50,
        &[
            "--switch-wait-s",
            "0",
            "--max-live-reservations",
            "3",
            "--max-requests-per-s",
            "0.1",
            "--request-burst",
            "6",
            "--max-request-bytes",
            "65536",
        ],
    );
    let mut client = controller.client().await;
    let submit = |tenant: &str, ids: &[&str]| proto::SubmitDemandRequest {
        header: as_tenant(tenant, header()),
        reference_unix_ns: 0,
        demands: ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                demand(
                    id,
                    "10.0.1.1",
                    "10.0.2.1",
                    1_000_000_000 + i as u64,
                    10_000_000,
                    1_000_000,
                    None,
                )
            })
            .collect(),
    };
    let list = |tenant: &str| proto::ListReservationsRequest {
        header: as_tenant(tenant, header()),
        ..Default::default()
    };
    // Requests 1 and 2 of 6 in the burst: three live reservations.
    client
        .submit_demand(submit("a", &["d1", "d2"]))
        .await
        .unwrap();
    client.submit_demand(submit("a", &["d3"])).await.unwrap();
    // 3: a fourth is over the live limit; nothing is reserved.
    let e = client
        .submit_demand(submit("a", &["d4"]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    assert!(
        e.message().contains("holds 3 live reservations")
            && e.message().contains("--max-live-reservations"),
        "{}",
        e.message()
    );
    // 4: resubmitting a live demand creates nothing and is answered.
    client.submit_demand(submit("a", &["d3"])).await.unwrap();
    let live = client
        .list_reservations(list("a"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(live.reservations.len(), 3);
    // Another tenant has its own limits.
    client.submit_demand(submit("b", &["d1"])).await.unwrap();
    // 5 and 6 use the rest of tenant a's burst; 7 is over the rate.
    for _ in 0..2 {
        let e = client
            .cancel(proto::CancelRequest {
                header: as_tenant("a", header()),
                target: Some(cancel_request::Target::DemandId("nothing".into())),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);
    }
    let e = client
        .cancel(proto::CancelRequest {
            header: as_tenant("a", header()),
            target: Some(cancel_request::Target::DemandId("d1".into())),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{}", e.message());
    assert!(
        e.message().contains("--max-requests-per-s"),
        "{}",
        e.message()
    );
    assert_eq!(
        client
            .list_reservations(list("a"))
            .await
            .unwrap()
            .into_inner()
            .reservations
            .len(),
        3,
        "the refused cancel changed nothing"
    );
    // A request over --max-request-bytes is refused before it is read.
    let ids: Vec<String> = (0..2000).map(|i| format!("big-{i:04}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let e = client.submit_demand(submit("c", &ids)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::OutOfRange, "{}", e.message());
    assert!(client
        .list_reservations(list("c"))
        .await
        .unwrap()
        .into_inner()
        .reservations
        .is_empty());
    controller.kill();
}

/// `--tenant-shares a=0.3`: tenant a keeps 30 % of every link whatever the
/// others reserve, and no more; everyone else shares the other 70 %.
/// With the default 0.9 headroom h1's 100G NIC reserves 27G for a and
/// 63G for the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenant_keeps_its_share_of_the_links() {
    let dir = tempfile::tempdir().unwrap();
    let switches = common::unreachable_switches(dir.path());
    let controller = Controller::spawn(
        dir.path(),
        &switches,
        50,
        &["--switch-wait-s", "0", "--tenant-shares", "a=0.3"],
    );
    let mut client = controller.client().await;
    const G: u64 = 1_000_000_000;
    let mut submit = async |tenant: &str, id: &str, gbps: u64| {
        let request = proto::SubmitDemandRequest {
            header: as_tenant(tenant, header()),
            reference_unix_ns: 0,
            demands: vec![demand(id, "10.0.1.1", "10.0.2.1", 2 * G, G, gbps * G, None)],
        };
        let answer = client.submit_demand(request).await.unwrap().into_inner();
        answer.reservations.into_iter().next().unwrap()
    };
    let admitted = proto::ReservationStatus::Admitted as i32;
    // b takes most of the rest; c, in the same group, finds 3G of it.
    assert_eq!(submit("b", "b1", 60).await.status, admitted);
    let c = submit("c", "c1", 40).await;
    assert_ne!(c.status, admitted);
    assert!(
        c.advisory
            .contains("within the share of the tenants without a share of their own: 70%"),
        "{}",
        c.advisory
    );
    // a's 27G are still there, and a gets no more than them.
    assert_eq!(submit("a", "a1", 27).await.status, admitted);
    let over = submit("a", "a2", 5).await;
    assert_ne!(over.status, admitted);
    assert!(
        over.advisory.contains("within the share of tenant a: 30%"),
        "{}",
        over.advisory
    );
    controller.kill();
}

/// A malformed `--tenant-shares` stops the controller with the reason.
#[test]
fn a_bad_share_is_refused_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_foresight"))
        .args(["controller", "--tenant-shares", "a=0.6,b=0.6"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--tenant-shares") && err.contains("the shares sum to 1.200, more than 1"),
        "{err}"
    );
}
