//! The operator's link command (`POST /v1/links`): take a fabric link
//! down or bring it up. The engine re-plans the reservations on it; the
//! compiler moves routes and ECMP groups off it; one `transact` persists,
//! sends every switch its new state and, once acknowledged, publishes the
//! link event and the re-planned reservations.

use super::controller::{Controller, Mutation};
use super::events::{Affected, Event};
use crate::daemon::engine::LinkChange;
use crate::daemon::monitoring::api;

impl Controller {
    /// Take a fabric link down or bring it up (operator command): re-plan
    /// the reservations on it, move routes and ECMP groups, persist, send
    /// the new state to every switch, then publish the link event and the
    /// re-planned reservations. Bad input changes nothing.
    pub async fn set_link(
        &self,
        node: &str,
        port: u32,
        down: bool,
    ) -> Result<api::LinkChangeView, (u16, String)> {
        let ((change, links_down), done) = self
            .transact(|inner, now| {
                let change = inner
                    .engine
                    .set_link(node, port, down, now)
                    .map_err(|e| (400, e))?;
                if change.changed {
                    let edges = inner.engine.down_edges();
                    inner
                        .compiler
                        .set_down_edges(&edges)
                        .map_err(|e| (500, e.to_string()))?;
                }
                let links_down: Vec<String> = inner
                    .engine
                    .state
                    .links_down
                    .iter()
                    .map(|l| l.to_string())
                    .collect();
                let events = if change.changed {
                    self.link_events(&change, down, now)
                } else {
                    Vec::new()
                };
                Ok(Mutation {
                    changed: change.changed,
                    value: (change, links_down),
                    events,
                })
            })
            .await?;
        if change.changed {
            tracing::warn!(link = %change.link, down, replanned = change.affected.len(), "link state changed by the operator");
        }
        Ok(api::LinkChangeView {
            link: change.link.to_string(),
            state: if down { "down" } else { "up" }.to_string(),
            changed: change.changed,
            replanned: change
                .affected
                .iter()
                .map(|r| api::ReplannedView {
                    id: r.id.clone(),
                    status: r.status.name().to_string(),
                    advisory: r.advisory.clone(),
                    revision: r.revision,
                })
                .collect(),
            switch_changes: done.changes,
            switch_errors: done.errors,
            links_down,
        })
    }

    /// The link event (the link as the operator named it, who may see which
    /// affected reservation), then each re-planned reservation.
    fn link_events(&self, change: &LinkChange, down: bool, now: u64) -> Vec<Event> {
        let l = self.topo.edge(change.edges[0]);
        let link = Event::Link {
            down,
            link: ndsp::types::LinkId {
                from_node: self.topo.node_name(l.from).to_string(),
                from_port: u32::from(l.from_port),
                to_node: self.topo.node_name(l.to).to_string(),
                to_port: u32::from(l.to_port),
            },
            observed_unix_ns: now,
            affected: change
                .affected
                .iter()
                .map(|r| Affected {
                    tenant: r.tenant.clone(),
                    job_id: r.job_id.clone(),
                    reservation_id: r.id.clone(),
                })
                .collect(),
        };
        std::iter::once(link)
            .chain(change.affected.iter().cloned().map(Event::reservation))
            .collect()
    }
}
