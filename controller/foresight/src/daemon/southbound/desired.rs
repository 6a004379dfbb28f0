//! What every switch should hold at a given moment, derived from the
//! reservation records: the static state (routes, ECMP groups, ECMP mode,
//! hash seed and offset, SR adjacencies, INT, ECN, collector), plus, for every reserved flow whose install window
//! `[start - lead, end)` contains the moment:
//!
//! * at its ingress leaf, the SR push entry (label stack and priority
//!   queue) and, where something reads it ([`Policy::watch_reserved`]),
//!   the INT watch entry;
//! * unless it is background traffic that yields (NDSP's BACKGROUND
//!   class, when `background_tc` is not the reserved queue: it keeps its
//!   path and capacity, in that queue, and clears the way for nothing):
//! * on every port of its path, the lowered DCQCN profile for every queue
//!   but the reserved one, which keeps its own (one `dcqcn_port` entry
//!   between the port's two static ones, its profile for all queues and
//!   its reserved queue's; removed when no reservation needs the port any
//!   more);
//! * on those ports, a pre-drain entry for every known competing flow: a
//!   flow the controller knows of that is not reserved (ECMP fallback),
//!   whose ECMP path crosses the port while the reservation is installed.
//!
//! A job's standing patterns (see `engine::patterns`) put their flows' SR
//! push (and watch) entries and their ports' lowered profile on the
//! switches whatever the time, for the job's life; its steps on them
//! (pinned flows) add no entries of their own, only their windows, which
//! pre-drain reads.
//!
//! Two reservations of the same (source, destination, QP) at the same
//! time cannot both own its entry: the earlier reservation (by sequence)
//! keeps it, and the later one takes over when it ends.
//!
//! Entities are resolved against the P4Info once per flow and cached (by
//! reservation id and revision), so computing the whole state is map work.
//! A switch's state is its static state (shared) with an overlay of what
//! the reservations add; a commit sends only the switches whose overlay
//! changed since the last ([`Compiler::changes`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use installer::ecn::{dcqcn_lowered_entry, dcqcn_reserved_queue_entry, EcnProfile};
use installer::intent::{Key, Resolved};
use installer::layered::Layered;
use installer::reservations::{host_pair_watch_entry, ReservedFlow};
use installer::reserved_entries::ReservedEntries;
use installer::static_state::{
    collector_config_with_down, hash_mode_config, port_mtu_config, static_state_with_down,
    switch_hash_config, Collector, EcmpMode,
};
use installer::{Devices, Intent, IntentError, Object};
use p4rt::proto::p4::v1 as p4;
use p4rt::{P4Info, SharedEntity};
use planner::ecmp::SeedPolicy;
use planner::topology::EdgeId;
use planner::Topology;

use crate::daemon::persistence::state::State;
use crate::daemon::persistence::state_records::{FlowRecord, Hop, Pattern, Reservation, Status};

/// Settings of the dynamic state.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Install this long before a flow starts.
    pub lead_ns: u64,
    /// DCQCN profile of every port at rest.
    pub ecn: EcnProfile,
    /// DCQCN profile of ports a reservation is about to use or uses.
    pub lowered: EcnProfile,
    /// Pre-drain marking probability, 1/65536.
    pub predrain_probability: u16,
    /// Where INT sinks send reports, if anywhere.
    pub collector: Option<Collector>,
    /// How the switches pick ECMP members.
    pub ecmp_hash: EcmpMode,
    /// Where each switch's ECMP hash seed and offset come from.
    pub ecmp_seeds: SeedPolicy,
    /// Priority queue (MPLS traffic class) of reserved traffic.
    pub reserved_tc: u8,
    /// Priority queue of reserved background traffic (planner priority
    /// [`BACKGROUND_PRIORITY`] or below); `reserved_tc` makes it reserved
    /// traffic like any other.
    pub background_tc: u8,
    /// MTU of every switch port for INT's M bit (None: unchecked).
    pub int_mtu: Option<u16>,
    /// Give every reserved flow its INT watch entry. Only INT reports (to
    /// a collector) and the controller's counter polls (learning or
    /// following from counters) read it; without them it would be one
    /// more write per flow, as many as the SR pushes, for nothing.
    pub watch_reserved: bool,
    /// Meter every reserved flow's SR push entry at its grant, so what it
    /// sends beyond the grant leaves in the lowest queue (installer's
    /// `policing`); off: reserved traffic keeps its queue whatever it sends.
    pub police_reserved: bool,
}

type Resolved1 = (Key, Arc<SharedEntity>);

/// A flow of a reservation record: (sequence number, revision, flow
/// index). Numbers only, so that looking a flow's cached entities up on
/// every pass allocates nothing.
type FlowKey = (u64, u64, usize);

/// Planner priority of NDSP's BACKGROUND class (see `planner_priority` in
/// `engine/outcome.rs`).
pub const BACKGROUND_PRIORITY: u8 = 32;

/// How an overlay's entity goes onto the static state: replacing the
/// static entity of its key (a port's lowered DCQCN profile, watch
/// entries), or only where the key is free (a flow's entries: the first
/// reservation of a key keeps it).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Write {
    Replace,
    IfAbsent,
}

/// What the reservations add to one switch's static state, in the order
/// it is applied.
#[derive(Debug, Default)]
struct Overlay(Vec<(Write, Key, Arc<SharedEntity>)>);

/// Entities are mostly the cached ones of the last pass: the same
/// allocation is equal without comparing its fields.
impl PartialEq for Overlay {
    fn eq(&self, other: &Overlay) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((w, k, e), (ow, ok, oe))| {
                    w == ow && k == ok && (Arc::ptr_eq(e, oe) || e == oe)
                })
    }
}

/// `entity` onto `switch`'s overlay.
fn push(out: &mut HashMap<String, Overlay>, switch: &str, write: Write, (key, entity): &Resolved1) {
    let op = (write, key.clone(), entity.clone());
    match out.get_mut(switch) {
        Some(o) => o.0.push(op),
        None => {
            out.insert(switch.to_string(), Overlay(vec![op]));
        }
    }
}

/// A switch's static state with `overlay` laid over it.
fn compose(base: &Arc<Resolved>, overlay: Option<&Overlay>) -> Layered {
    let mut top = BTreeMap::new();
    for (write, key, entity) in overlay.map_or(&[][..], |o| &o.0) {
        match write {
            Write::Replace => {
                top.insert(key.clone(), entity.clone());
            }
            Write::IfAbsent => {
                if !base.entities.contains_key(key) {
                    top.entry(key.clone()).or_insert_with(|| entity.clone());
                }
            }
        }
    }
    Layered {
        base: base.clone(),
        top,
    }
}

/// Cached entities of one reserved flow at its ingress leaf.
struct FlowEntities {
    sr: Resolved1,
    /// None: nothing reads it ([`Policy::watch_reserved`]).
    watch: Option<Resolved1>,
}

pub struct Compiler {
    topo: &'static Topology,
    info: Arc<P4Info>,
    devices: Arc<Devices>,
    policy: Policy,
    /// Every switch's static state, shared by the states derived from it.
    base: BTreeMap<String, Arc<Resolved>>,
    /// Every switch's static state with the standing patterns' entries laid
    /// over it: what the reservations' overlays go on. Rebuilt only when
    /// the patterns change, so a step's commit costs what the step changes.
    standing: BTreeMap<String, Arc<Resolved>>,
    /// The patterns (by seq) `standing` holds; `None`: to be rebuilt.
    standing_of: Option<Vec<u64>>,
    /// Ports the standing patterns keep at the lowered profile.
    standing_ports: HashSet<(String, u16)>,
    /// Switches whose standing state changed since the last `changes`.
    standing_changed: BTreeSet<String>,
    /// The lowered DCQCN entry of every port (see `dcqcn_lowered_entry`).
    lowered: HashMap<(String, u16), Resolved1>,
    flows: HashMap<FlowKey, Arc<FlowEntities>>,
    /// The entities of standing patterns' flows, by (pattern seq, flow):
    /// built once per pattern, not per step.
    pattern_flows: HashMap<(u64, usize), Arc<FlowEntities>>,
    predrain: HashMap<(FlowKey, String, u16), Arc<Resolved1>>,
    /// Telemetry-only watch entries of steered flows: resolved once, not
    /// on every pass.
    steered_watch: HashMap<FlowKey, Arc<Resolved1>>,
    /// INT watch of learned jobs' host pairs, by source leaf (T+5).
    job_watch: Vec<(String, Resolved1)>,
    /// The overlays the last [`Compiler::changes`] was derived from (None:
    /// send every switch next time).
    sent: Option<HashMap<String, Overlay>>,
    /// Builds reserved flows' entries from ids resolved at pipeline load.
    reserved: ReservedEntries,
}

fn resolve_one(
    switch: &str,
    object: Object,
    info: &P4Info,
    devices: &Devices,
) -> Result<Resolved1, IntentError> {
    let resolved = Intent {
        objects: vec![object],
    }
    .resolve(switch, info, devices)?;
    Ok(resolved
        .entities
        .into_iter()
        .next()
        .expect("one keyed object"))
}

/// A prepared entity of `switch` with its key.
fn keyed(
    switch: &str,
    entity: Result<p4::Entity, p4rt::entity::BuildError>,
) -> Result<Resolved1, IntentError> {
    let entity = entity.map_err(|e| IntentError {
        switch: switch.to_string(),
        source: e.into(),
    })?;
    let key = installer::intent::key_of(&entity).expect("a table entry is keyed");
    Ok((key, Arc::new(entity.into())))
}

/// The resolved static state of every switch with `down` edges out of
/// service, and the lowered DCQCN entry of every port.
type Base = (
    BTreeMap<String, Arc<Resolved>>,
    HashMap<(String, u16), Resolved1>,
);

fn base_state(
    topo: &Topology,
    info: &P4Info,
    devices: &Devices,
    policy: &Policy,
    down: &BTreeSet<EdgeId>,
) -> Result<Base, IntentError> {
    let mut intents = static_state_with_down(topo, policy.ecn, down);
    for (name, intent) in intents.iter_mut() {
        intent.push(hash_mode_config(policy.ecmp_hash));
        let s = topo
            .switch_by_name(name)
            .expect("static state is per switch");
        let role = topo.switches()[s as usize].role;
        let hash = policy.ecmp_seeds.switch_hash(name, role);
        let objects = switch_hash_config(info, hash).map_err(|e| IntentError {
            switch: name.clone(),
            source: p4rt::entity::BuildError::Invalid(e).into(),
        })?;
        for o in objects {
            intent.push(o);
        }
    }
    if let Some(mtu) = policy.int_mtu {
        for (switch, objects) in port_mtu_config(topo, mtu) {
            let intent = intents.entry(switch).or_default();
            for o in objects {
                intent.push(o);
            }
        }
    }
    if let Some(c) = policy.collector {
        for (switch, objects) in collector_config_with_down(topo, c, down) {
            let intent = intents.entry(switch).or_default();
            for o in objects {
                intent.push(o);
            }
        }
    }
    // Every port with a static DCQCN profile can be lowered around a
    // burst; its reserved queue keeps the static profile, in an entry of
    // its own that is static too (a burst then adds one entry per port).
    let mut lowered = HashMap::new();
    for (name, intent) in intents.iter_mut() {
        let ports: Vec<u16> = intent
            .objects
            .iter()
            .filter_map(|o| match o {
                Object::Entry(e) if e.table == installer::names::DCQCN_PORT => {
                    Some(e.matches["egress_port"].parse().expect("ports are numbers"))
                }
                _ => None,
            })
            .collect();
        for port in ports {
            intent.push(dcqcn_reserved_queue_entry(
                port,
                policy.reserved_tc,
                policy.ecn,
            ));
            let entry = resolve_one(
                name,
                dcqcn_lowered_entry(port, policy.lowered),
                info,
                devices,
            )?;
            lowered.insert((name.clone(), port), entry);
        }
    }
    let mut base = BTreeMap::new();
    // Switches of a tier hold many identical entities (routes to the same
    // subnets through the same group, port settings): each is kept once,
    // found by its wire encoding, which it then keeps for its first send.
    let mut shared: HashMap<Vec<u8>, Resolved1> = HashMap::new();
    for (name, intent) in &intents {
        let mut resolved = intent.resolve(name, info, devices)?;
        resolved.entities = std::mem::take(&mut resolved.entities)
            .into_iter()
            .map(|(key, entity)| {
                shared
                    .entry(entity.wire().to_vec())
                    .or_insert((key, entity))
                    .clone()
            })
            .collect();
        base.insert(name.clone(), Arc::new(resolved));
    }
    Ok((base, lowered))
}

impl Compiler {
    /// Intended state for the switches `devices` describes, resolved
    /// against `info`.
    pub fn new(
        topo: &'static Topology,
        info: Arc<P4Info>,
        devices: Arc<Devices>,
        policy: Policy,
    ) -> Result<Compiler, IntentError> {
        let (base, lowered) = base_state(topo, &info, &devices, &policy, &BTreeSet::new())?;
        let reserved = ReservedEntries::new(&info).map_err(|e| IntentError {
            switch: "every switch".into(),
            source: e.into(),
        })?;
        Ok(Compiler {
            reserved,
            topo,
            info,
            devices,
            policy,
            standing: base.clone(),
            base,
            standing_of: None,
            standing_ports: HashSet::new(),
            standing_changed: BTreeSet::new(),
            lowered,
            flows: HashMap::new(),
            pattern_flows: HashMap::new(),
            predrain: HashMap::new(),
            steered_watch: HashMap::new(),
            job_watch: Vec::new(),
            sent: None,
        })
    }

    /// Take the directed edges in `down` out of the static state (routes,
    /// ECMP groups, the report path of INT sinks), or put them back.
    pub fn set_down_edges(&mut self, down: &BTreeSet<EdgeId>) -> Result<(), IntentError> {
        let (base, lowered) = base_state(self.topo, &self.info, &self.devices, &self.policy, down)?;
        self.base = base;
        self.lowered = lowered;
        self.standing_of = None;
        self.sent = None;
        Ok(())
    }

    /// Lays the standing patterns of `state` over the static state, when
    /// they are not the ones laid already: their flows' SR push (and watch)
    /// entries, which win a key they share with a reservation (they hold
    /// the paths the job's steps are booked on), and the lowered profile of
    /// their ports, for the job's life.
    fn refresh_standing(&mut self, state: &State) -> Result<(), IntentError> {
        let patterns: Vec<&Pattern> = state
            .jobs
            .iter()
            .flat_map(|j| &j.patterns)
            .map(|p| &**p)
            .collect();
        let seqs: Vec<u64> = patterns.iter().map(|p| p.seq).collect();
        if self.standing_of.as_ref() == Some(&seqs) {
            return Ok(());
        }
        let mut adds: HashMap<String, Overlay> = HashMap::new();
        let mut ports = HashSet::new();
        let mut live = HashSet::new();
        for p in patterns {
            let yields = self.yields_at(p.priority);
            for (i, f) in p.flows.iter().enumerate() {
                live.insert((p.seq, i));
                let e = self.pattern_entities(p, i)?;
                push(&mut adds, &f.hops[0].switch, Write::IfAbsent, &e.sr);
                if let Some(watch) = &e.watch {
                    push(&mut adds, &f.hops[0].switch, Write::IfAbsent, watch);
                }
                if yields {
                    continue;
                }
                for h in f.hops.iter() {
                    let port = (h.switch.clone(), h.port);
                    if !ports.contains(&port) {
                        if let Some(entry) = self.lowered.get(&port) {
                            push(&mut adds, &h.switch, Write::Replace, entry);
                        }
                        ports.insert(port);
                    }
                }
            }
        }
        self.pattern_flows.retain(|k, _| live.contains(k));
        let mut standing = BTreeMap::new();
        for (name, base) in &self.base {
            let laid = match adds.get(name) {
                None => base.clone(),
                Some(overlay) => Arc::new(compose(base, Some(overlay)).whole()),
            };
            let before = self.standing.get(name);
            if before.is_none_or(|b| !Arc::ptr_eq(b, &laid)) {
                self.standing_changed.insert(name.clone());
            }
            standing.insert(name.clone(), laid);
        }
        self.standing = standing;
        self.standing_ports = ports;
        self.standing_of = Some(seqs);
        Ok(())
    }

    /// Watch these (source, destination) host pairs at the source's leaf,
    /// whatever is reserved (the jobs being learned); the leaves that now
    /// hold watch entries. Pairs with a host outside the fabric are skipped.
    pub fn set_watched_pairs(
        &mut self,
        pairs: &BTreeSet<(Ipv4Addr, Ipv4Addr)>,
    ) -> Result<BTreeSet<String>, IntentError> {
        let mut watch = Vec::new();
        for &(src, dst) in pairs {
            let Some(host) = self.topo.hosts().iter().find(|h| h.ip == src) else {
                continue;
            };
            let leaf = self.topo.switches()[host.leaf as usize].name.clone();
            let e = resolve_one(
                &leaf,
                host_pair_watch_entry(src, dst),
                &self.info,
                &self.devices,
            )?;
            watch.push((leaf, e));
        }
        let leaves = watch.iter().map(|(leaf, _)| leaf.clone()).collect();
        self.job_watch = watch;
        Ok(leaves)
    }

    /// Background traffic in a queue of its own yields to everything: see
    /// the module doc.
    fn yields(&self, r: &Reservation) -> bool {
        self.yields_at(r.priority)
    }

    fn yields_at(&self, priority: u8) -> bool {
        priority <= BACKGROUND_PRIORITY && self.policy.background_tc != self.policy.reserved_tc
    }

    /// A flow held by its source port (entropy steering) has nothing
    /// installed; where the switches run Foresight's program and INT
    /// reports go to a collector, its INT watch entry still goes in during
    /// its window, so the collector sees which path the fabric's hash gave
    /// it (telemetry only: the entry steers nothing).
    fn watches_steered(&self, f: &FlowRecord, now: u64) -> bool {
        self.policy.collector.is_some()
            && f.udp_src_port.is_some()
            && f.status.reserves()
            && !f.hops.is_empty()
            && f.install_unix_ns(self.policy.lead_ns) <= now
            && now < f.end_unix_ns
    }

    fn reserved_flow(&self, f: &FlowRecord) -> ReservedFlow {
        self.reserved_flow_on(
            &f.hops,
            f.src_ip,
            f.dst_ip,
            f.dst_qp(),
            &f.labels,
            f.accepted_bps,
        )
    }

    fn reserved_flow_on(
        &self,
        hops: &[Hop],
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
        dst_qp: Option<u32>,
        labels: &[u32],
        grant_bps: u64,
    ) -> ReservedFlow {
        let hops: Vec<(u32, u16)> = hops
            .iter()
            .map(|h| {
                (
                    self.topo
                        .switch_by_name(&h.switch)
                        .expect("hops name fabric switches"),
                    h.port,
                )
            })
            .collect();
        ReservedFlow {
            demand: String::new(),
            flow: 0,
            ingress_leaf: hops[0].0,
            src_ip,
            dst_ip,
            dst_qp,
            labels: labels.to_vec(),
            hops,
            start_ns: 0,
            end_ns: 0,
            grant_bps: if self.policy.police_reserved {
                grant_bps
            } else {
                0
            },
        }
    }

    /// The entities of flow `i` of a standing pattern (cached by pattern).
    fn pattern_entities(
        &mut self,
        p: &Pattern,
        i: usize,
    ) -> Result<Arc<FlowEntities>, IntentError> {
        let key = (p.seq, i);
        if let Some(e) = self.pattern_flows.get(&key) {
            return Ok(e.clone());
        }
        let f = &p.flows[i];
        let rf = self.reserved_flow_on(
            &f.hops,
            f.src_ip,
            f.dst_ip,
            f.dst_qp(),
            &f.labels,
            f.grant_bps,
        );
        let leaf = &f.hops[0].switch;
        let tc = self.tc_of(p.priority);
        let entities = Arc::new(FlowEntities {
            sr: keyed(leaf, self.reserved.sr(&rf, tc))?,
            watch: match self.policy.watch_reserved {
                true => Some(keyed(leaf, self.reserved.watch(&rf))?),
                false => None,
            },
        });
        self.pattern_flows.insert(key, entities.clone());
        Ok(entities)
    }

    /// The queue of reserved traffic of planner priority `priority`.
    fn tc_of(&self, priority: u8) -> u8 {
        if self.yields_at(priority) {
            self.policy.background_tc
        } else {
            self.policy.reserved_tc
        }
    }

    fn flow_entities(
        &mut self,
        r: &Reservation,
        i: usize,
        f: &FlowRecord,
    ) -> Result<Arc<FlowEntities>, IntentError> {
        let key = (r.seq, r.revision, i);
        if let Some(e) = self.flows.get(&key) {
            return Ok(e.clone());
        }
        let rf = self.reserved_flow(f);
        let leaf = &f.hops[0].switch;
        let tc = self.tc_of(r.priority);
        let entities = Arc::new(FlowEntities {
            sr: keyed(leaf, self.reserved.sr(&rf, tc))?,
            watch: match self.policy.watch_reserved {
                true => Some(keyed(leaf, self.reserved.watch(&rf))?),
                false => None,
            },
        });
        self.flows.insert(key, entities.clone());
        Ok(entities)
    }

    fn predrain_entity(
        &mut self,
        flow: FlowKey,
        f: &FlowRecord,
        switch: &str,
        port: u16,
    ) -> Result<Arc<Resolved1>, IntentError> {
        let key = (flow, switch.to_string(), port);
        if let Some(e) = self.predrain.get(&key) {
            return Ok(e.clone());
        }
        let entity = self.reserved.predrain(
            self.devices.device_port(switch, port),
            f.src_ip,
            f.dst_ip,
            f.dst_qp(),
            self.policy.predrain_probability,
        );
        let e = Arc::new(keyed(switch, entity)?);
        self.predrain.insert(key, e.clone());
        Ok(e)
    }

    /// The intended state of every switch at `now` (Unix ns).
    pub fn desired(
        &mut self,
        state: &State,
        now: u64,
    ) -> Result<BTreeMap<String, Resolved>, IntentError> {
        let overlays = self.overlays(state, now)?;
        Ok(self
            .layered(&overlays)
            .into_iter()
            .map(|(name, l)| (name, l.whole()))
            .collect())
    }

    /// The intended state at `now` of the switches whose state differs
    /// from the last call's (every switch on the first call and after
    /// [`Compiler::set_down_edges`]): a commit sends only these, so its
    /// cost follows the switches a change touches, not the fabric's size.
    /// A switch left out still holds what it was last sent.
    pub fn changes(
        &mut self,
        state: &State,
        now: u64,
    ) -> Result<BTreeMap<String, Layered>, IntentError> {
        let overlays = self.overlays(state, now)?;
        let empty = Overlay::default();
        let restanded = std::mem::take(&mut self.standing_changed);
        let out = match &self.sent {
            None => self.layered(&overlays),
            Some(sent) => {
                let differs = |name: &String| {
                    restanded.contains(name)
                        || overlays.get(name).unwrap_or(&empty) != sent.get(name).unwrap_or(&empty)
                };
                let touched: BTreeSet<&String> = overlays
                    .keys()
                    .chain(sent.keys())
                    .chain(restanded.iter())
                    .filter(|n| differs(n))
                    .collect();
                touched
                    .into_iter()
                    .filter_map(|name| {
                        let standing = self.standing.get(name)?;
                        Some((name.clone(), compose(standing, overlays.get(name))))
                    })
                    .collect()
            }
        };
        self.sent = Some(overlays);
        Ok(out)
    }

    fn layered(&self, overlays: &HashMap<String, Overlay>) -> BTreeMap<String, Layered> {
        self.standing
            .iter()
            .map(|(name, base)| (name.clone(), compose(base, overlays.get(name))))
            .collect()
    }

    /// What the reservations add to each switch's static state at `now`.
    fn overlays(
        &mut self,
        state: &State,
        now: u64,
    ) -> Result<HashMap<String, Overlay>, IntentError> {
        let lead = self.policy.lead_ns;
        let mut out: HashMap<String, Overlay> = HashMap::new();
        for (leaf, entity) in &self.job_watch {
            push(&mut out, leaf, Write::Replace, entity);
        }
        // Install windows of active reserved flows, by (switch, port).
        let mut busy: HashMap<(&str, u16), Vec<(u64, u64)>> = HashMap::new();
        self.refresh_standing(state)?;
        // Pre-drain needs the windows of every reserved flow, pinned ones
        // included, only when some flow falls back to ECMP: otherwise a
        // pinned step costs nothing here.
        let predrain_targets = state
            .reservations
            .iter()
            .any(|r| !matches!(r.status, Status::Admitted | Status::Deferred));
        let mut live_flows = HashSet::new();
        let mut live_steered = HashSet::new();
        // Only records whose first flow starts within the lead can have
        // entries on the switches now; in sequence order, since an earlier
        // reservation's entries win over a later one's.
        let installed = in_seq_order(state.reservations.starting_by(now.saturating_add(lead)));
        for r in installed {
            for (i, f) in r.flows.iter().enumerate() {
                if !f.active(now, lead) {
                    if self.watches_steered(f, now) {
                        let key = (r.seq, r.revision, i);
                        let watch = match self.steered_watch.get(&key) {
                            Some(w) => w.clone(),
                            None => {
                                let rf = self.reserved_flow(f);
                                let leaf = &f.hops[0].switch;
                                let w = Arc::new(keyed(leaf, self.reserved.watch(&rf))?);
                                self.steered_watch.insert(key, w.clone());
                                w
                            }
                        };
                        live_steered.insert(key);
                        push(&mut out, &f.hops[0].switch, Write::Replace, &watch);
                    }
                    continue;
                }
                // A pinned flow's entries are its pattern's, standing.
                if f.pinned && !predrain_targets {
                    continue;
                }
                if !f.pinned {
                    live_flows.insert((r.seq, r.revision, i));
                    let e = self.flow_entities(r, i, f)?;
                    push(&mut out, &f.hops[0].switch, Write::IfAbsent, &e.sr);
                    if let Some(watch) = &e.watch {
                        push(&mut out, &f.hops[0].switch, Write::IfAbsent, watch);
                    }
                }
                if self.yields(r) {
                    continue;
                }
                for h in f.hops.iter() {
                    let windows = busy.entry((h.switch.as_str(), h.port)).or_insert_with(|| {
                        // A port's lowered entry once, however many
                        // flows cross it (a standing pattern's port has it).
                        let port = (h.switch.clone(), h.port);
                        if !self.standing_ports.contains(&port) {
                            if let Some(entry) = self.lowered.get(&port) {
                                push(&mut out, &h.switch, Write::Replace, entry);
                            }
                        }
                        Vec::new()
                    });
                    windows.push((f.install_unix_ns(lead), f.end_unix_ns));
                }
            }
        }
        let mut live_predrain = HashSet::new();
        if !busy.is_empty() {
            // Fallback flows that overlap a busy window start before its end.
            let last_busy = busy.values().flatten().map(|w| w.1).max().unwrap_or(0);
            let overlapping =
                in_seq_order(state.reservations.starting_by(last_busy.saturating_sub(1)));
            for r in overlapping {
                for (i, f) in r.flows.iter().enumerate() {
                    if f.status != Status::FallbackEcmp || f.hops.is_empty() || now >= f.end_unix_ns
                    {
                        continue;
                    }
                    for h in f.hops.iter() {
                        let overlaps = busy.get(&(h.switch.as_str(), h.port)).is_some_and(|ws| {
                            ws.iter()
                                .any(|&(s, e)| f.start_unix_ns < e && s < f.end_unix_ns)
                        });
                        if !overlaps {
                            continue;
                        }
                        let flow = (r.seq, r.revision, i);
                        live_predrain.insert((flow, h.switch.clone(), h.port));
                        let e = self.predrain_entity(flow, f, &h.switch, h.port)?;
                        push(&mut out, &h.switch, Write::IfAbsent, &e);
                    }
                }
            }
        }
        // Forget entities of flows no longer installed.
        if self.flows.len() > 2 * live_flows.len() + 1024 {
            self.flows.retain(|k, _| live_flows.contains(k));
        }
        if self.predrain.len() > 2 * live_predrain.len() + 1024 {
            self.predrain.retain(|k, _| live_predrain.contains(k));
        }
        if self.steered_watch.len() > 2 * live_steered.len() + 1024 {
            self.steered_watch.retain(|k, _| live_steered.contains(k));
        }
        Ok(out)
    }
}

/// `records` sorted by sequence number.
fn in_seq_order<'a>(records: impl Iterator<Item = &'a Reservation>) -> Vec<&'a Reservation> {
    let mut records: Vec<&Reservation> = records.collect();
    records.sort_unstable_by_key(|r| r.seq);
    records
}
