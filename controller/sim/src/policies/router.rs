//! How each flow is routed under a policy (`PolicyRouter`, the engine's
//! `Router`): hashed, on its QPs' hashes, least-loaded, sprayed as shared
//! fabric parts, a flowlet's random path, or a planned path; and what
//! reordering costs sprayed and flowlet traffic on go-back-N NICs.

use std::collections::HashMap;

use planner::paths::Path;
use planner::topology::{EdgeId, HostIdx, NodeRef, SwitchIdx};

use crate::engine::{Factors, Links, Router};
use crate::parts::{PartId, Parts, Route as SimRoute, Use};
use crate::reorder::{RandomPaths, ReorderModel};
use crate::routing::{Fabric, FlowHash, FlowKey, Hashed};

#[derive(Clone, Copy, Debug)]
pub(super) enum How {
    Hashed(FlowHash),
    /// Connection `c`: one hash per QP, `qp_hashes[c * qps..(c + 1) * qps]`.
    QpHashed(u32),
    Adaptive(FlowHash),
    Spray,
    /// A random member per hop from this draw (a flowlet).
    Flowlet(u32),
    /// Index into the planned paths, and the hash for a fallback.
    Fixed(u32, FlowHash),
    Ideal,
}

pub(super) struct Route {
    pub(super) src: HostIdx,
    pub(super) dst: HostIdx,
    pub(super) how: How,
}

pub(super) struct PolicyRouter<'t> {
    pub(super) fabric: Fabric<'t>,
    pub(super) routes: Vec<Route>,
    /// QPs per connection (qp-hash) and their hashes.
    pub(super) qps: u32,
    pub(super) qp_hashes: Vec<FlowHash>,
    /// On a described fabric, per route what its switches hash (the
    /// connection's QPs' keys in `qp_keys`, like `qp_hashes`); empty on
    /// Foresight's program, which hashes the [`FlowHash`]es.
    pub(super) keys: Vec<FlowKey>,
    pub(super) qp_keys: Vec<FlowKey>,
    pub(super) paths: Vec<Path>,
    /// Sprayed fabric parts per (source leaf, destination leaf); `None`:
    /// unreachable. Cleared when links fail.
    pub(super) spray: HashMap<(SwitchIdx, SwitchIdx), Option<Vec<PartId>>>,
    pub(super) uses: Vec<Use>,
    /// Go-back-N NICs under spraying or flowlets: what reordering costs.
    pub(super) gbn: Option<ReorderModel>,
    /// Per flow, its bits (flowlets on go-back-N NICs only).
    pub(super) bits: Vec<f64>,
    /// Per leaf pair, the random paths' hops (none: unreachable or one
    /// leaf) and their delay variance at an epoch. Cleared when links fail.
    pub(super) spreads: HashMap<(SwitchIdx, SwitchIdx), Spread>,
}

/// The random paths between two leaves and their delay variance at an epoch.
pub(super) struct Spread {
    paths: RandomPaths,
    epoch: u64,
    var_ns2: f64,
}

/// A well-mixed 32-bit draw from a seed and an index (SplitMix64).
pub(crate) fn draw(seed: u64, i: u64) -> u32 {
    let mut r = planner::rng::Rng::new(seed ^ i.wrapping_mul(0xa076_1d64_78bd_642f));
    (r.next_u64() >> 32) as u32
}

impl PolicyRouter<'_> {
    /// Fluid spraying: the NIC links, plus the leaf pair's fabric shares
    /// as shared parts (one rising, one falling on a Clos).
    fn sprayed(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        parts: &mut Parts,
        out: &mut SimRoute,
    ) -> bool {
        let topo = self.fabric.topo;
        let (up, down) = (topo.host_up_edge(src), topo.host_down_edge(dst));
        if self.fabric.is_failed(up) || self.fabric.is_failed(down) {
            return false;
        }
        let key = (
            topo.hosts()[src as usize].leaf,
            topo.hosts()[dst as usize].leaf,
        );
        if !self.spray.contains_key(&key) {
            let ids = self.fabric.sprayed(src, dst, &mut self.uses).then(|| {
                let fabric = &self.uses[1..self.uses.len() - 1];
                let rising = |e: EdgeId| {
                    let l = topo.edge(e);
                    let tier = |n: NodeRef| match n {
                        NodeRef::Switch(s) => topo.switches()[s as usize].role.tier(),
                        NodeRef::Host(_) => 0,
                    };
                    tier(l.to) > tier(l.from)
                };
                fabric
                    .chunk_by(|a, b| rising(a.0) == rising(b.0))
                    .map(|run| parts.intern(run))
                    .collect()
            });
            self.spray.insert(key, ids);
        }
        let Some(ids) = &self.spray[&key] else {
            return false;
        };
        out.edges.push(up);
        out.parts.extend_from_slice(ids);
        out.edges.push(down);
        true
    }

    /// Delay variance of a random path from `src`'s leaf to `dst`'s, ns²,
    /// at the links' current loads (once per leaf pair and epoch).
    fn path_variance(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        model: &ReorderModel,
        links: &Links<'_>,
    ) -> f64 {
        let topo = self.fabric.topo;
        let key = (
            topo.hosts()[src as usize].leaf,
            topo.hosts()[dst as usize].leaf,
        );
        if !self.spreads.contains_key(&key) {
            let paths = if self.fabric.sprayed(src, dst, &mut self.uses) {
                RandomPaths::of_sprayed(topo, &self.uses)
            } else {
                RandomPaths::default()
            };
            let fresh = Spread {
                paths,
                epoch: u64::MAX,
                var_ns2: 0.0,
            };
            self.spreads.insert(key, fresh);
        }
        let s = self.spreads.get_mut(&key).expect("inserted above");
        if s.epoch != links.epoch {
            s.var_ns2 = s.paths.variance(model, links);
            s.epoch = links.epoch;
        }
        s.var_ns2
    }
}

impl Router for PolicyRouter<'_> {
    fn subflows(&self, i: usize) -> u32 {
        match self.routes[i].how {
            How::QpHashed(_) => self.qps,
            _ => 1,
        }
    }
    fn route(
        &mut self,
        i: usize,
        sub: u32,
        load: &[f64],
        parts: &mut Parts,
        out: &mut SimRoute,
    ) -> bool {
        let r = &self.routes[i];
        let (src, dst) = (r.src, r.dst);
        // The fabric's terms: the key where described, else the hash.
        let hashed = |keys: &[FlowKey], at: usize, h: FlowHash| {
            keys.get(at)
                .map_or(Hashed::Program(h), |&k| Hashed::Described(k))
        };
        let (keys, qp_keys) = (&self.keys, &self.qp_keys);
        let f = &mut self.fabric;
        let u = &mut self.uses;
        let ok = match r.how {
            How::Hashed(h) => f.hashed(src, dst, hashed(keys, i, h), u),
            How::QpHashed(c) => {
                let at = c as usize * self.qps as usize + sub as usize;
                f.hashed(src, dst, hashed(qp_keys, at, self.qp_hashes[at]), u)
            }
            How::Adaptive(h) => f.least_loaded(src, dst, hashed(keys, i, h), load, u),
            How::Spray => return self.sprayed(src, dst, parts, out),
            How::Flowlet(d) => f.random(src, dst, d, u),
            How::Fixed(p, h) => {
                f.fixed(src, &self.paths[p as usize], u)
                    || f.least_loaded(src, dst, hashed(keys, i, h), load, u)
            }
            How::Ideal => f.ideal(src, dst, u),
        };
        debug_assert!(
            u.iter().all(|x| x.1 == 1.0),
            "single-path routes load whole links"
        );
        out.edges.extend(u.iter().map(|x| x.0));
        ok
    }
    fn fail(&mut self, edges: &[u32]) {
        for &e in edges {
            self.fabric.fail(e);
        }
        self.spray.clear();
        self.spreads.clear();
    }
    fn rehash_on_failure(&self, i: usize) -> bool {
        matches!(
            self.routes[i].how,
            How::Hashed(_) | How::QpHashed(_) | How::Spray
        )
    }
    fn reorders(&self, i: usize) -> bool {
        self.gbn.is_some() && matches!(self.routes[i].how, How::Spray | How::Flowlet(_))
    }
    fn factors(&mut self, i: usize, rate: f64, links: &Links<'_>) -> Factors {
        let Some(model) = self.gbn else {
            return Factors::WHOLE;
        };
        let r = &self.routes[i];
        let (src, dst, how) = (r.src, r.dst, r.how);
        let var = self.path_variance(src, dst, &model, links);
        match how {
            How::Spray => {
                let nic = self.fabric.topo.edge(self.fabric.topo.host_up_edge(src));
                let nic_rate = nic.capacity_bps as f64 / 1e9;
                model.gbn(rate, model.spray_ooo(rate, nic_rate, var))
            }
            How::Flowlet(_) => model.flowlet_gbn(rate, self.bits[i], model.flowlet_overtake(var)),
            _ => Factors::WHOLE,
        }
    }
}
