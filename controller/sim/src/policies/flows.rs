//! One policy's flows: every iteration of every job's demands, the
//! background flows and streams, each with how it is routed (the QP hashes
//! under qp-hash, a flowlet's draw, the planned path, the steered port).

use planner::demand::Flow;
use planner::ecmp::{HashKey, HashMode};

use super::policy::Policy;
use super::router::{draw, How, Route};
use crate::engine::SimFlow;
use crate::qps::{flow_key_on_qp, key_on_qp, qp_blocks};
use crate::routing::{FlowHash, FlowKey};
use crate::workload::Workload;

/// How unannounced traffic is routed under a policy, and what a described
/// switch hashes of it; `qp` is the flow's QP under qp-hash (numbered by
/// [`qps::qp_blocks`](crate::qps::qp_blocks)); `draw` picks a flowlet's path.
fn unannounced(policy: Policy, f: &Flow, qp: Option<u32>, draw: u32) -> (How, FlowKey) {
    let five = FlowHash::of(&HashKey::of_flow(f, HashMode::FiveTuple));
    let how = match policy {
        Policy::Ideal => How::Ideal,
        Policy::Ecmp | Policy::Foresight | Policy::ForesightReplan | Policy::ForesightEntropy => {
            How::Hashed(five)
        }
        Policy::QpHash { .. } => {
            let qp = qp.expect("qp-hash numbers every flow's QPs");
            return (
                How::Hashed(FlowHash::of(&key_on_qp(f, qp))),
                flow_key_on_qp(qp),
            );
        }
        Policy::Adaptive => How::Adaptive(five),
        Policy::Spray(_) => How::Spray,
        Policy::Flowlet(_) => How::Flowlet(draw),
    };
    (how, FlowKey::of(f))
}

/// One policy's flows and how each is routed.
pub(super) struct Prepared {
    pub(super) flows: Vec<SimFlow>,
    pub(super) routes: Vec<Route>,
    /// qp-hash: per connection its QPs' hashes.
    pub(super) qp_hashes: Vec<FlowHash>,
    /// On a described fabric (else empty): per route, and per connection's
    /// QP, what the switches hash.
    pub(super) keys: Vec<FlowKey>,
    pub(super) qp_keys: Vec<FlowKey>,
}

/// Simulation inputs derived for one policy: flows, their routing, and the
/// QP hashes (qp-hash: `qps` per connection, on the consecutive QPs
/// [`qps::qp_blocks`](crate::qps::qp_blocks) gives it, the same every iteration). Foresight's
/// paths and the QP hashes are indexed like [`Workload::connections`].
/// A flowlet's path is drawn from `seed` and the flow's index (each
/// iteration's flows draw afresh). With `path_per_step`, the planned paths
/// hold one per connection per iteration, iteration-major (a re-plan per
/// step). A connection's bits in each iteration are
/// [`Workload::bytes`]. Under entropy steering, `ports` gives
/// per connection the source port it was told to send on. `described`:
/// the switches hash as described, so keep every route's key.
pub(super) fn prepare(
    w: &Workload,
    policy: Policy,
    planned: bool,
    path_per_step: bool,
    seed: u64,
    ports: &[Option<u16>],
    described: bool,
) -> Prepared {
    let mut first = Vec::with_capacity(w.demands.len());
    let mut total = 0;
    for d in &w.demands {
        first.push(total);
        total += d.flows.len();
    }
    // Sized once: these hold a row per flow of every iteration.
    let rows = w
        .jobs
        .iter()
        .map(|js| {
            js.iterations as usize
                * w.demands[js.demands.clone()]
                    .iter()
                    .map(|d| d.flows.len())
                    .sum::<usize>()
        })
        .sum::<usize>()
        + w.background.len()
        + w.streams.len();
    let mut flows = Vec::with_capacity(rows);
    let mut routes = Vec::with_capacity(rows);
    let mut keys = Vec::with_capacity(if described { rows } else { 0 });
    let blocks = match policy {
        Policy::QpHash { qps } => Some(qp_blocks(w, qps)),
        _ => None,
    };
    let qp_hashes: Vec<FlowHash> = match (policy, &blocks) {
        (Policy::QpHash { qps }, Some(b)) => w
            .connections()
            .zip(&b.connections)
            .flat_map(|(f, &start)| (start..start + qps).map(|qp| FlowHash::of(&key_on_qp(f, qp))))
            .collect(),
        _ => Vec::new(),
    };
    let qp_keys: Vec<FlowKey> = match (policy, &blocks) {
        (Policy::QpHash { qps }, Some(b)) if described => b
            .connections
            .iter()
            .flat_map(|&start| (start..start + qps).map(flow_key_on_qp))
            .collect(),
        _ => Vec::new(),
    };
    for (job, js) in w.jobs.iter().enumerate() {
        for n in 0..js.iterations {
            for di in js.demands.clone() {
                for (k, f) in w.demands[di].flows.iter().enumerate() {
                    let conn = (first[di] + k) as u32;
                    let bits = w.bytes(n, conn as usize, f) as f64 * 8.0;
                    flows.push(SimFlow::gated(bits, job as u32, n, f.start_ns as f64));
                    let five = || FlowHash::of(&HashKey::of_flow(f, HashMode::FiveTuple));
                    let mut key = FlowKey::of(f);
                    let how = match policy {
                        Policy::Ideal => How::Ideal,
                        Policy::Ecmp => How::Hashed(five()),
                        // The connection's QPs share its bytes equally.
                        Policy::QpHash { .. } => How::QpHashed(conn),
                        Policy::Adaptive => How::Adaptive(five()),
                        Policy::Spray(_) => How::Spray,
                        Policy::Flowlet(_) => How::Flowlet(draw(seed, routes.len() as u64)),
                        Policy::Foresight | Policy::ForesightReplan => {
                            assert!(planned, "Foresight needs the planned paths");
                            let step = if path_per_step { n * total as u32 } else { 0 };
                            How::Fixed(step + conn, five())
                        }
                        Policy::ForesightEntropy => match ports[conn as usize] {
                            Some(port) => {
                                let mut steered = f.clone();
                                steered.udp_src_port = port;
                                key.udp_src_port = port;
                                How::Hashed(FlowHash::of(&HashKey::of_flow(
                                    &steered,
                                    HashMode::FiveTuple,
                                )))
                            }
                            None => How::Hashed(five()),
                        },
                    };
                    if described {
                        keys.push(key);
                    }
                    routes.push(Route {
                        src: f.src,
                        dst: f.dst,
                        how,
                    });
                }
            }
        }
    }
    let background = w.background.iter().enumerate().map(|(i, f)| {
        let flow = SimFlow::at(f.bytes as f64 * 8.0, f.start_ns as f64);
        (flow, f, blocks.as_ref().map(|b| b.background[i]))
    });
    let streams = w.streams.iter().enumerate().map(|(i, f)| {
        let mut flow = SimFlow::at(f64::INFINITY, 0.0);
        flow.max_gbps = (f.rate_bps as f64 / 1e9) as f32;
        (flow, f, blocks.as_ref().map(|b| b.streams[i]))
    });
    for (flow, f, qp) in background.chain(streams) {
        flows.push(flow);
        let (how, key) = unannounced(policy, f, qp, draw(seed, routes.len() as u64));
        if described {
            keys.push(key);
        }
        routes.push(Route {
            src: f.src,
            dst: f.dst,
            how,
        });
    }
    Prepared {
        flows,
        routes,
        qp_hashes,
        keys,
        qp_keys,
    }
}
