//! Install once, admit per step, on BMv2: a controller with
//! `--standing-patterns` and the lab's small leaf-spine. A job's first
//! ring step puts its entries on the switches for good; later steps of the
//! same ring are admitted on the same QPs and paths and the switches, read
//! back over P4Runtime, hold exactly what they held; a link down on the
//! pattern's paths moves the entries around it.
//!
//! Skipped (with a line saying so) when BMv2 is not installed.

mod common;

use common::*;
use ndsp::Validate;

const MS: u64 = 1_000_000;

fn qps_and_labels(r: &ndsp::types::ValidatedReservation) -> Vec<(Option<u32>, Vec<u32>)> {
    r.flows
        .iter()
        .map(|f| (f.dest_qp, f.sr_label_stack.clone()))
        .collect()
}

/// What the controller wrote to the switches for a submission (its
/// `foresight-switch-changes` header).
fn switch_changes<T>(r: &tonic::Response<T>) -> u64 {
    r.metadata()
        .get("foresight-switch-changes")
        .expect("the header")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_steps_write_nothing_and_a_link_down_moves_the_pattern() {
    let _serial = serial().await;
    let Some(fabric) = Fabric::start("standing patterns on BMv2") else {
        return;
    };
    let controller = fabric.controller_with(50, &["--standing-patterns"]);
    let mut reader = fabric.reader().await;
    let mut client = controller.client().await;
    client
        .register_topology(register("train", &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap();

    // The first step: planned, its entries in (and they stay).
    let first = client
        .submit_collective(ring_allreduce("step-0", "train", 16, 2, 0, 300 * MS))
        .await
        .unwrap();
    let changes = switch_changes(&first);
    let first = first.into_inner().validate().unwrap();
    assert!(changes > 0, "the first step installs its pattern");
    assert!(first.flows.iter().all(|f| f.accepted_bps > 0));
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let installed = reader.everything().await;
    let sr = reader.entries(&["FsIngress.sr.reservation"]).await;
    let sr_count: usize = sr.values().map(|s| s.len()).sum();
    assert_eq!(
        sr_count,
        first.flows.len(),
        "after the first step's end too"
    );

    // Later steps (granted no more than the first): the same QPs and
    // labels, nothing written at submission, at their start or at their
    // end; the switches hold the same.
    for i in 1..=3 {
        let id = format!("step-{i}");
        let step = client
            .submit_collective(ring_allreduce(
                &id,
                "train",
                16,
                2,
                0,
                300 * MS + i * 50 * MS,
            ))
            .await
            .unwrap();
        let changes = switch_changes(&step);
        let step = step.into_inner().validate().unwrap();
        assert_eq!(changes, 0, "step {i} wrote to the switches");
        assert_eq!(qps_and_labels(&step), qps_and_labels(&first), "step {i}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            reader.everything().await == installed,
            "the switches changed during step {i}"
        );
    }

    // A step granted more (the same bytes in less time) raises the
    // meters: one MODIFY per SR entry, read back with the new rate.
    let meters = |sr: &std::collections::BTreeMap<String, Vec<p4rt::proto::p4::v1::TableEntry>>| {
        let mut rates: Vec<i64> = sr
            .values()
            .flatten()
            .map(|t| t.meter_config.as_ref().expect("a metered entry").cir)
            .collect();
        rates.sort_unstable();
        rates.dedup();
        rates
    };
    let before = meters(&reader.tables(&["FsIngress.sr.reservation"]).await);
    let faster = client
        .submit_collective(ring_allreduce("step-faster", "train", 16, 2, 0, 150 * MS))
        .await
        .unwrap();
    let changes = switch_changes(&faster) as usize;
    let faster = faster.into_inner().validate().unwrap();
    assert_eq!(qps_and_labels(&faster), qps_and_labels(&first));
    assert_eq!(changes, first.flows.len(), "one meter per flow rises");
    let after_raise = meters(&reader.tables(&["FsIngress.sr.reservation"]).await);
    assert!(
        after_raise.iter().max() > before.iter().max(),
        "{before:?} -> {after_raise:?}"
    );
    let installed = reader.everything().await;

    // A link on the pattern's paths goes down: the pattern goes, and the
    // next step installs a new one around the failure.
    let first_hop = &first.flows[0].hops[0];
    let (status, body) = controller.post_json(&format!(
        "/v1/links/{}:{}/down",
        first_hop.node, first_hop.egress_port
    ));
    assert_eq!(status, 200, "{body}");
    let after = client
        .submit_collective(ring_allreduce("step-after", "train", 16, 2, 0, 200 * MS))
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert!(after.flows.iter().all(|f| f.accepted_bps > 0));
    let crosses = |r: &ndsp::types::ValidatedReservation| {
        r.flows.iter().any(|f| {
            f.hops
                .iter()
                .any(|h| h.node == first_hop.node && h.egress_port == first_hop.egress_port)
        })
    };
    assert!(!crosses(&after), "the new pattern avoids the link");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(reader.everything().await != installed);
    controller.kill();
}
