//! Per-tenant shares of the fabric: admission keeps a slice of every link
//! for each tenant, so that one tenant's reservations cannot take the
//! capacity another one was promised.
//!
//! # The policy
//!
//! - Shares are fractions of each link's reservable capacity
//!   (`headroom × capacity`), given per tenant (`alice=0.5,bob=0.3`). Every
//!   tenant not named shares the *rest* (`*`, by default
//!   `1 − Σ named`): together, not each.
//! - A share is a hard slice. Each share group is planned by a planner of
//!   its own whose headroom is `headroom × share`, against its own
//!   reservations only. As the shares sum to at most 1, no link is ever
//!   over the headroom, and a tenant can always reserve its share of every
//!   link whatever the others hold.
//! - It is not work-conserving: a slice left idle is not lent to others
//!   (lending would need pre-emption to keep the promise). Traffic beyond
//!   the reservations still flows on ECMP with ECN.
//! - Joint re-placement moves only the reservations of the group being
//!   planned.
//!
//! Without shares there is one group with the whole capacity: exactly the
//! plain [`Planner`].

use std::collections::BTreeMap;

use crate::admission::{DemandPlan, Moved, Planner, PlannerConfig};
use crate::demand::Demand;
use crate::ledger::Window;
use crate::paths::Path;
use crate::topology::{EdgeId, HostIdx, Topology};

/// The group of every tenant not named.
pub const REST: &str = "*";

/// Configured shares, checked: each in (0, 1], the sum at most 1.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantShares {
    /// Named tenants, and `*` for everyone else.
    shares: BTreeMap<String, f64>,
}

impl Default for TenantShares {
    /// No shares: everyone in one group with the whole capacity.
    fn default() -> Self {
        TenantShares {
            shares: BTreeMap::from([(REST.to_string(), 1.0)]),
        }
    }
}

impl std::str::FromStr for TenantShares {
    type Err = String;

    /// `TENANT=FRACTION,...`, with `*=FRACTION` for the tenants not named
    /// (default: what the named ones leave).
    fn from_str(s: &str) -> Result<TenantShares, String> {
        let mut shares = BTreeMap::new();
        for (i, item) in s.split(',').map(str::trim).enumerate() {
            let (tenant, fraction) = item
                .split_once('=')
                .ok_or_else(|| format!("item {} ({item:?}): expected TENANT=FRACTION", i + 1))?;
            let tenant = tenant.trim();
            if tenant.is_empty() {
                return Err(format!("item {} ({item:?}): the tenant is empty", i + 1));
            }
            let share: f64 = fraction.trim().parse().map_err(|_| {
                format!("{tenant}: {fraction:?} is not a number (a fraction in (0, 1])")
            })?;
            if !(share > 0.0 && share <= 1.0) {
                return Err(format!("{tenant}: share {share} is not in (0, 1]"));
            }
            if shares.insert(tenant.to_string(), share).is_some() {
                return Err(format!("{tenant}: named twice"));
            }
        }
        let sum: f64 = shares.values().sum();
        if sum > 1.0 + 1e-9 {
            return Err(format!("the shares sum to {sum:.3}, more than 1"));
        }
        if !shares.contains_key(REST) {
            let rest = 1.0 - sum;
            if rest < 1e-9 {
                return Err(format!(
                    "the named shares sum to 1 and leave nothing for other tenants; give them a share ({REST}=FRACTION) by lowering the others"
                ));
            }
            shares.insert(REST.to_string(), rest);
        }
        Ok(TenantShares { shares })
    }
}

impl TenantShares {
    /// The group `tenant` plans in: itself if named, else `*`.
    pub fn group<'a>(&'a self, tenant: &'a str) -> &'a str {
        if self.shares.contains_key(tenant) {
            tenant
        } else {
            REST
        }
    }

    /// The fraction of every link `tenant`'s group may reserve.
    pub fn share(&self, tenant: &str) -> f64 {
        self.shares[self.group(tenant)]
    }

    /// Whether any tenant is limited (shares were configured).
    pub fn is_limited(&self) -> bool {
        self.shares.len() > 1 || self.shares.values().any(|&s| s < 1.0)
    }

    /// Under shares, the slice `tenant` was planned in, for the advisory
    /// of a demand that did not fit (none without shares).
    pub fn describe(&self, tenant: &str) -> Option<String> {
        if !self.is_limited() {
            return None;
        }
        let whose = match self.group(tenant) {
            REST => "the tenants without a share of their own".to_string(),
            group => format!("tenant {group}"),
        };
        Some(format!(
            "within the share of {whose}: {:.0}% of each link's reservable capacity",
            self.share(tenant) * 100.0
        ))
    }

    /// The groups and their shares.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.shares.iter().map(|(k, &v)| (k.as_str(), v))
    }
}

impl std::fmt::Display for TenantShares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self.iter().map(|(t, s)| format!("{t}={s}")).collect();
        f.write_str(&items.join(","))
    }
}

/// What one planning call did, over every group it touched.
#[derive(Clone, Debug, Default)]
pub struct SharedPlan {
    /// One per demand, in input order (`DemandPlan::demand` indexes the input).
    pub demands: Vec<DemandPlan>,
    /// Earlier reservations that moved (of the planned groups only).
    pub moved: Vec<Moved>,
}

/// One [`Planner`] per share group over the same topology.
pub struct SharedPlanner<'t> {
    shares: TenantShares,
    planners: BTreeMap<String, Planner<'t>>,
}

impl<'t> SharedPlanner<'t> {
    /// Planners for every group, each with `config.headroom × share`.
    pub fn new(topo: &'t Topology, config: PlannerConfig, shares: TenantShares) -> Self {
        let planners = shares
            .iter()
            .map(|(group, share)| {
                let mut c = config.clone();
                c.headroom = config.headroom * share;
                (group.to_string(), Planner::new(topo, c))
            })
            .collect();
        SharedPlanner { shares, planners }
    }

    /// The shares in force.
    pub fn shares(&self) -> &TenantShares {
        &self.shares
    }

    fn planner_mut(&mut self, tenant: &str) -> &mut Planner<'t> {
        let group = self.shares.group(tenant).to_string();
        self.planners.get_mut(&group).expect("a planner per group")
    }

    /// Plans `demands`: each tenant's in its group, as one set per group
    /// (see [`Planner::plan_moving`]); `movable` may name reservations of
    /// any group, each group moves only its own.
    pub fn plan_moving(&mut self, demands: &[Demand], movable: &[&str]) -> SharedPlan {
        let mut by_group: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, d) in demands.iter().enumerate() {
            by_group
                .entry(self.shares.group(&d.tenant).to_string())
                .or_default()
                .push(i);
        }
        let mut out: Vec<Option<DemandPlan>> = vec![None; demands.len()];
        let mut moved = Vec::new();
        for (group, indices) in by_group {
            let set: Vec<Demand> = indices.iter().map(|&i| demands[i].clone()).collect();
            let planner = self.planners.get_mut(&group).expect("a planner per group");
            let plan = planner.plan_moving(&set, movable);
            for mut dp in plan.demands {
                let original = indices[dp.demand];
                dp.demand = original;
                out[original] = Some(dp);
            }
            moved.extend(plan.moved);
        }
        SharedPlan {
            demands: out
                .into_iter()
                .map(|d| d.expect("every demand planned in its group"))
                .collect(),
            moved,
        }
    }

    /// Re-places the movable reservations of every group (paths only) where
    /// that lowers their peak; see [`Planner::reoptimize`].
    pub fn reoptimize(&mut self, movable: &[&str]) -> Vec<Moved> {
        self.planners
            .values_mut()
            .flat_map(|p| p.reoptimize(movable).moved)
            .collect()
    }

    /// Re-enters a reservation of `tenant` as it was (see [`Planner::restore`]).
    pub fn restore(&mut self, tenant: &str, id: &str, flows: &[(HostIdx, Path, Window, u64)]) {
        self.planner_mut(tenant).restore(id, flows);
    }

    /// Books fixed per-link entries for `tenant` (see [`Planner::book_fixed`]).
    pub fn book_fixed(&mut self, tenant: &str, id: &str, entries: &[(EdgeId, Window, u64)]) {
        self.planner_mut(tenant).book_fixed(id, entries);
    }

    /// Frees a reservation's capacity, whichever group holds it.
    pub fn release(&mut self, id: &str) -> bool {
        self.planners.values_mut().any(|p| p.release(id))
    }

    /// Marks a directed edge down or up in every group.
    pub fn set_edge_down(&mut self, e: EdgeId, down: bool) {
        for p in self.planners.values_mut() {
            p.set_edge_down(e, down);
        }
    }

    /// The path the switches' ECMP gives `f` (every group's planner sees
    /// the same switches and links).
    pub fn ecmp_path_of(&self, f: &crate::Flow) -> crate::Path {
        let p = self.planners.values().next().expect("a planner per group");
        p.ecmp_path_of(f)
    }

    /// Whether an edge is down.
    pub fn is_edge_down(&self, e: EdgeId) -> bool {
        self.planners.values().any(|p| p.is_edge_down(e))
    }

    /// Bit/s `tenant` could still reserve on `e` over `w` (its group's
    /// slice less what the group holds).
    pub fn free_bps(&self, tenant: &str, e: EdgeId, w: Window) -> u64 {
        self.planners[self.shares.group(tenant)].free_bps(e, w)
    }

    /// Bit/s reserved on `e` at `t`, every group together.
    pub fn reserved_at(&self, e: EdgeId, t: u64) -> u64 {
        self.planners.values().map(|p| p.ledger().at(e, t)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Outcome;
    use crate::conventions::FIRST_QP;
    use crate::flow::Flow;
    use crate::topology::generate::{leaf_spine, LeafSpine};

    fn shares(s: &str) -> TenantShares {
        s.parse().unwrap()
    }

    #[test]
    fn shares_parse_and_name_what_is_wrong() {
        let s = shares("alice=0.5, bob=0.3");
        assert_eq!(s.share("alice"), 0.5);
        assert!((s.share("carol") - 0.2).abs() < 1e-12);
        assert_eq!(s.group("carol"), REST);
        assert!(s.is_limited());
        assert!(!TenantShares::default().is_limited());
        for (bad, says) in [
            ("alice", "item 1"),
            ("alice=x", "alice: \"x\" is not a number"),
            ("alice=0", "alice: share 0 is not in (0, 1]"),
            ("alice=1.5", "not in (0, 1]"),
            ("alice=0.6,bob=0.6", "sum to 1.200"),
            ("alice=0.5,alice=0.1", "alice: named twice"),
            ("alice=0.5,bob=0.5", "leave nothing for other tenants"),
            ("=0.5", "the tenant is empty"),
        ] {
            let e = bad.parse::<TenantShares>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// 2 leaves × 2 hosts, one spine, 100G links.
    fn fabric() -> Topology {
        let spec = leaf_spine(&LeafSpine {
            spines: 1,
            ..Default::default()
        });
        Topology::from_spec(spec.unwrap()).unwrap()
    }

    /// One second from host 0 (leaf 1) to host 2 (leaf 2): it crosses
    /// both NICs and the spine, all 100G.
    fn demand(topo: &Topology, id: &str, tenant: &str, gbps: f64) -> Demand {
        let rate_bps = (gbps * 1e9) as u64;
        Demand {
            id: id.into(),
            tenant: tenant.into(),
            priority: 0,
            elastic: false,
            deadline_ns: None,
            kind: crate::demand::DemandKind::Transfer,
            flows: vec![Flow::new(topo, 0, 2, FIRST_QP, 0, rate_bps / 8, rate_bps)],
        }
    }

    #[test]
    fn a_tenant_keeps_its_share_whatever_the_others_ask() {
        let topo = fabric();
        let config = PlannerConfig {
            headroom: 1.0,
            allow_partial: false,
            ..PlannerConfig::default()
        };
        let mut p = SharedPlanner::new(&topo, config.clone(), shares("alice=0.3"));
        // The rest (70 Gbit/s) goes to everyone else together.
        let greedy = p.plan_moving(
            &[
                demand(&topo, "b1", "bob", 50.0),
                demand(&topo, "c1", "carol", 30.0),
            ],
            &[],
        );
        assert_eq!(greedy.demands[0].outcome, Outcome::Admitted);
        assert!(matches!(
            greedy.demands[1].outcome,
            Outcome::Rejected { .. }
        ));
        // alice's 30 Gbit/s are still there for her, and no more.
        let a = p.plan_moving(&[demand(&topo, "a1", "alice", 30.0)], &[]);
        assert_eq!(a.demands[0].outcome, Outcome::Admitted);
        let over = p.plan_moving(&[demand(&topo, "a2", "alice", 1.0)], &[]);
        assert!(matches!(over.demands[0].outcome, Outcome::Rejected { .. }));
        // The spine link carries 80 Gbit/s: never above the headroom.
        let spine_max = (0..topo.edge_count() as u32)
            .map(|e| p.reserved_at(e, 0))
            .max()
            .unwrap();
        assert_eq!(spine_max, 80_000_000_000);
        // Released capacity returns to its group only.
        assert!(p.release("b1"));
        let b = p.plan_moving(&[demand(&topo, "c2", "carol", 70.0)], &[]);
        assert_eq!(b.demands[0].outcome, Outcome::Admitted);
        assert!(!p.release("b1"));
        // Without shares the same fabric is one pool.
        let mut plain = SharedPlanner::new(&topo, config, TenantShares::default());
        let all = plain.plan_moving(&[demand(&topo, "b1", "bob", 100.0)], &[]);
        assert_eq!(all.demands[0].outcome, Outcome::Admitted);
    }

    #[test]
    fn a_mixed_set_is_planned_per_group_in_input_order() {
        let topo = fabric();
        let mut p = SharedPlanner::new(&topo, PlannerConfig::default(), shares("alice=0.5"));
        let plan = p.plan_moving(
            &[
                demand(&topo, "x", "bob", 10.0),
                demand(&topo, "y", "alice", 10.0),
                demand(&topo, "z", "bob", 10.0),
            ],
            &[],
        );
        let order: Vec<usize> = plan.demands.iter().map(|d| d.demand).collect();
        assert_eq!(order, vec![0, 1, 2]);
        assert!(plan.demands.iter().all(|d| d.outcome == Outcome::Admitted));
    }
}
