//! The controller's INT options on BMv2: `--int-mtu` gives every port of
//! every switch its MTU (for the M bit), and `--int-report-every` sets the
//! report sampling of every INT sink (leaf); without them ports stay unchecked and
//! every packet is reported.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use p4rt::proto::p4::v1 as p4;

const PORT_MTU: &str = "FsEgress.int_egress.port_mtu";
const SAMPLING: &str = "FsIngress.int_ingress.report_sampling";

/// The ports of each switch in the test topology (leaf-spine-small).
fn ports_per_switch() -> BTreeMap<String, usize> {
    let topo = planner::topology::yaml::load_file(TOPOLOGY).unwrap();
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    for (s, sw) in topo.switches().iter().enumerate() {
        out.insert(sw.name.clone(), topo.switch_out_edges(s as u32).len());
    }
    for host in topo.hosts() {
        *out.get_mut(&topo.switches()[host.leaf as usize].name)
            .unwrap() += 1;
    }
    out
}

/// The default action of the sampling table on every switch, as
/// `action(params)`.
async fn sampling_defaults(reader: &mut Reader) -> BTreeMap<String, String> {
    let info = reader.info().await.clone();
    let table_id = info.table(SAMPLING).unwrap().preamble.as_ref().unwrap().id;
    let mut out = BTreeMap::new();
    for (name, sw) in &reader.sessions {
        let read = sw
            .read(vec![p4::Entity {
                entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry {
                    table_id,
                    is_default_action: true,
                    ..Default::default()
                })),
            }])
            .await
            .unwrap();
        for e in read {
            if let Some(p4::entity::Entity::TableEntry(t)) = e.entity {
                let line = entry_line(&p4rt::EntrySpec::from_entry(&info, &t).unwrap());
                out.insert(name.clone(), line);
            }
        }
    }
    out
}

/// The port MTU entries once every switch has all of its ports (polled:
/// the controller installs after it starts), or what is there at the
/// deadline.
async fn port_mtus(
    reader: &mut Reader,
    want: &BTreeMap<String, usize>,
) -> BTreeMap<String, BTreeSet<String>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = reader.entries(&[PORT_MTU]).await;
        let complete = want
            .iter()
            .all(|(sw, n)| got.get(sw).map_or(0, BTreeSet::len) == *n);
        if complete || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn int_mtu_reaches_every_port_and_report_sampling_every_sink() {
    let _serial = serial().await;
    let Some(fabric) = Fabric::start("INT MTU and report sampling on BMv2") else {
        return;
    };
    let want = ports_per_switch();
    assert_eq!(want.len(), 4, "{want:?}");
    let controller = fabric.controller_with(
        100,
        &[
            "--int-collector",
            "h4",
            "--int-mtu",
            "1500",
            "--int-report-every",
            "8",
        ],
    );
    let mut reader = fabric.reader().await;
    let mtus = port_mtus(&mut reader, &want).await;
    for (sw, n) in &want {
        let lines = &mtus[sw];
        assert_eq!(lines.len(), *n, "{sw}: {lines:?}");
        assert!(
            lines.iter().all(|l| l.ends_with("set_port_mtu(mtu=1500)")),
            "{sw}: {lines:?}"
        );
    }
    // Reports leave from sinks, the leaves (spines keep the P4 default).
    let sampling = sampling_defaults(&mut reader).await;
    for leaf in ["leaf1", "leaf2"] {
        assert!(
            sampling[leaf].ends_with("set_report_every(every=8)"),
            "{sampling:?}"
        );
    }
    controller.kill();

    // Without the options: no MTU entries, every packet reported.
    let controller = fabric.controller_with(100, &["--int-collector", "h4"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let (sampling, mtus) = loop {
        let s = sampling_defaults(&mut reader).await;
        let m = reader.entries(&[PORT_MTU]).await;
        let every_packet = s.values().all(|l| l.ends_with("set_report_every(every=1)"));
        if (every_packet && m.values().all(BTreeSet::is_empty)) || Instant::now() >= deadline {
            break (s, m);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        sampling
            .values()
            .all(|l| l.ends_with("set_report_every(every=1)")),
        "{sampling:?}"
    );
    assert!(mtus.values().all(BTreeSet::is_empty), "{mtus:?}");
    controller.kill();
}
