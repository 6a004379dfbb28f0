//! Controller failover on BMv2 (the lab's small leaf-spine, 4 switches):
//! three replicas of `foresight controller --etcd` (1 s lease) on a
//! three-member etcd cluster, with a 16-rank ring all-reduce's
//! reservations installed. Each round stops the leader and measures the
//! time until another replica leads and is primary and reconciled on every
//! switch (its ready file appears), then restarts the stopped replica as a
//! follower: first with SIGKILL (a crash: the followers find its NDSP port
//! refusing connections and revoke its lease), then with SIGTERM (a clean
//! stop: the replica revokes its lease itself). Also checks after
//! each round that the new leader still holds the collective.
//!
//! `cargo bench -p foresight --bench failover`
//! (env: `FORESIGHT_BENCH_FAILOVERS`, default 20 of each kind).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::replica::{start_replicas, wait_leader, Replica};
use common::*;
use ndsp::Validate;
use testkit::etcd::Cluster;

const MS: u64 = 1_000_000;

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds: usize = std::env::var("FORESIGHT_BENCH_FAILOVERS")
        .ok()
        .map(|v| v.parse().expect("FORESIGHT_BENCH_FAILOVERS: a number"))
        .unwrap_or(20);
    let Some(fabric) = Fabric::start("failover bench") else {
        return;
    };
    let Some(etcd) = Cluster::start("failover bench", 3) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let (mut replicas, mut leader) = start_replicas(&fabric, &etcd);
        let mut client = ndsp::proto::demand_signaling_client::DemandSignalingClient::connect(
            format!("http://{}", replicas[leader].ndsp),
        )
        .await
        .unwrap();
        client
            .register_topology(register("bench", &["10.0.1.1", "10.0.2.1"]))
            .await
            .unwrap();
        let collective = client
            .submit_collective(ring_allreduce("ring", "bench", 16, 8, 0, 3_600_000 * MS))
            .await
            .unwrap()
            .into_inner()
            .validate()
            .unwrap();
        let flows = collective.flows.len();
        println!("failover: 3 replicas (1 s etcd lease), 3 etcd members, 4 BMv2 switches; a 16-rank ring all-reduce ({flows} flows) installed");
        for (how, sigkill) in [("SIGKILLed", true), ("stopped (SIGTERM)", false)] {
            let mut times = Vec::new();
            for round in 0..rounds {
                let old = leader;
                let t0 = Instant::now();
                if sigkill {
                    replicas[old].kill();
                } else {
                    replicas[old].signal(libc::SIGTERM);
                }
                leader = wait_leader(&mut replicas, Some(old), Duration::from_secs(20));
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                times.push(ms);
                eprintln!(
                    "  {how} round {}/{rounds}: {} -> {} in {ms:.0} ms",
                    round + 1,
                    replicas[old].name,
                    replicas[leader].name
                );
                replicas[old].wait_exit(Duration::from_secs(10));
                replicas[old].kill();
                // The new leader holds the collective (it came from etcd).
                let mut client =
                    ndsp::proto::demand_signaling_client::DemandSignalingClient::connect(format!(
                        "http://{}",
                        replicas[leader].ndsp
                    ))
                    .await
                    .unwrap();
                let page = client
                    .list_reservations(ndsp::proto::ListReservationsRequest {
                        header: header(),
                        job_id: "bench".into(),
                        page_size: 10,
                        page_token: String::new(),
                    })
                    .await
                    .unwrap()
                    .into_inner()
                    .validate()
                    .unwrap();
                assert_eq!(page.reservations.len(), 1, "the collective survives");
                let name = replicas[old].name.clone();
                replicas[old] = Replica::spawn(&fabric, &etcd.endpoints(), &name);
                // Let the restarted replica join the campaign.
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            times.sort_by(f64::total_cmp);
            println!(
                "  leader {how} -> another replica primary and reconciled on all 4 switches, over {} failovers: p50 {:.0} ms, p99 {:.0} ms, min {:.0} ms, max {:.0} ms",
                times.len(),
                quantile(&times, 0.5),
                quantile(&times, 0.99),
                times[0],
                times[times.len() - 1]
            );
        }
    });
}
