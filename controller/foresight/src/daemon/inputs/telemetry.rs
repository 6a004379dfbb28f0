//! The INT collector: Telemetry Report v2.0 datagrams from the sink leaves
//! (`p4src/v1model/int.p4`: one individual report, INT-MD over UDP inner
//! packet, sink's entry on top of the stack) parsed into per-hop metadata,
//! and per-link load from them: every hop stamps its egress port's
//! transmitted bytes (Foresight domain-specific metadata) and its egress
//! timestamp, so two reports through the same port give its rate.
//!
//! From the same reports: congestion episodes (a port's queue occupancy
//! above a threshold, coalesced per port while reports keep seeing it above
//! within a gap) and per-flow observations (when a watched flow was first
//! seen, and the rate of its ingress port from the tx bytes its reports
//! carry) for forecast mismatch signals.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use installer::Devices;
use planner::topology::{EdgeId, NodeRef};
use planner::Topology;

use super::learning::Learning;
use crate::daemon::monitoring::metrics::Metrics;

const INS_NODE_ID: u16 = 0x8000;
const INS_L1_PORTS: u16 = 0x4000;
const INS_HOP_LATENCY: u16 = 0x2000;
const INS_QUEUE: u16 = 0x1000;
const INS_INGRESS_TS: u16 = 0x0800;
const INS_EGRESS_TS: u16 = 0x0400;
const INS_L2_PORTS: u16 = 0x0200;
const INS_TX_UTIL: u16 = 0x0100;
const INS_BUFFER: u16 = 0x0080;
const INS_CHECKSUM_COMPLEMENT: u16 = 0x0001;
const DOMAIN_FORESIGHT: u16 = 0x4653;
const DS_TX_BYTES: u16 = 0x8000;

/// One hop's metadata (fields its instructions did not ask for are `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HopMetadata {
    pub node_id: Option<u32>,
    pub ingress_port: Option<u16>,
    pub egress_port: Option<u16>,
    pub hop_latency: Option<u32>,
    pub queue_id: Option<u8>,
    pub queue_occupancy: Option<u32>,
    pub ingress_ts: Option<u64>,
    pub egress_ts: Option<u64>,
    pub tx_bytes: Option<u32>,
}

/// A parsed telemetry report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Node id of the reporting sink.
    pub node_id: u32,
    pub seq_no: u32,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// RoCE destination QP of the inner packet (from its BTH), when the
    /// inner packet is RoCEv2 and the report carries the BTH.
    pub dst_qp: Option<u32>,
    /// Size of the reported packet without its INT headers (its IPv4
    /// total length less the INT stack): what the flow carried.
    pub wire_bytes: u32,
    /// Hops, the sink's first (the stack is pushed on top).
    pub hops: Vec<HopMetadata>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("telemetry report: {0}")]
pub struct ReportError(String);

fn err<T>(m: impl Into<String>) -> Result<T, ReportError> {
    Err(ReportError(m.into()))
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], ReportError> {
        if self.at + n > self.b.len() {
            return err(format!(
                "truncated in {what} (byte {} of {})",
                self.at,
                self.b.len()
            ));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, ReportError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, ReportError> {
        let s = self.take(2, what)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32, ReportError> {
        let s = self.take(4, what)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self, what: &str) -> Result<u64, ReportError> {
        Ok((u64::from(self.u32(what)?) << 32) | u64::from(self.u32(what)?))
    }
}

/// Parse the UDP payload of a report.
pub fn parse_report(payload: &[u8]) -> Result<Report, ReportError> {
    let mut r = Reader { b: payload, at: 0 };
    let w0 = r.u32("group header")?;
    if w0 >> 28 != 2 {
        return err(format!("group header version {} (want 2)", w0 >> 28));
    }
    let seq_no = w0 & 0x3f_ffff;
    let node_id = r.u32("group header")?;
    let b0 = r.u8("individual report")?;
    let (rep_type, in_type) = (b0 >> 4, b0 & 0xf);
    if rep_type != 1 || in_type != 4 {
        return err(format!(
            "RepType {rep_type} InType {in_type} (want 1 INT, 4 IPv4)"
        ));
    }
    let _report_length = r.u8("individual report")?;
    let md_length = r.u8("individual report")?;
    r.take(1 + 8, "individual report")?;
    r.take(usize::from(md_length) * 4, "report metadata")?;
    // Inner IPv4 + UDP.
    let v_ihl = r.u8("inner IPv4")?;
    if v_ihl >> 4 != 4 || v_ihl & 0xf < 5 {
        return err("inner packet is not IPv4");
    }
    let ip = r.take(usize::from(v_ihl & 0xf) * 4 - 1, "inner IPv4")?;
    if ip[8] != 17 {
        return err(format!("inner protocol {} (want UDP)", ip[8]));
    }
    let total_len = u32::from(u16::from_be_bytes([ip[1], ip[2]]));
    let src = Ipv4Addr::new(ip[11], ip[12], ip[13], ip[14]);
    let dst = Ipv4Addr::new(ip[15], ip[16], ip[17], ip[18]);
    let udp = r.take(8, "inner UDP")?;
    let roce = u16::from_be_bytes([udp[2], udp[3]]) == planner::conventions::ROCEV2_UDP_PORT;
    // INT shim + INT-MD header.
    let shim0 = r.u8("INT shim")?;
    if shim0 >> 4 != 1 {
        return err(format!("INT shim type {} (want 1, INT-MD)", shim0 >> 4));
    }
    let len_words = usize::from(r.u8("INT shim")?);
    r.take(2, "INT shim")?;
    let md0 = r.u32("INT-MD header")?;
    if md0 >> 28 != 2 {
        return err(format!("INT-MD version {} (want 2)", md0 >> 28));
    }
    let hop_ml = ((md0 >> 8) & 0x1f) as usize;
    let ins = r.u16("INT-MD header")?;
    let domain = r.u16("INT-MD header")?;
    let ds = r.u16("INT-MD header")?;
    r.take(2, "INT-MD header")?;
    if len_words < 3 {
        return err(format!(
            "INT shim length {len_words} words is shorter than the INT-MD header"
        ));
    }
    let stack_words = len_words - 3;
    if hop_ml == 0 || stack_words % hop_ml != 0 {
        return err(format!(
            "stack of {stack_words} words is not a whole number of {hop_ml}-word hops"
        ));
    }
    let ds_tx = domain == DOMAIN_FORESIGHT && ds & DS_TX_BYTES != 0;
    let mut hops = Vec::new();
    for _ in 0..stack_words / hop_ml {
        let start = r.at;
        let mut h = HopMetadata::default();
        if ins & INS_NODE_ID != 0 {
            h.node_id = Some(r.u32("hop node id")?);
        }
        if ins & INS_L1_PORTS != 0 {
            h.ingress_port = Some(r.u16("hop ports")?);
            h.egress_port = Some(r.u16("hop ports")?);
        }
        if ins & INS_HOP_LATENCY != 0 {
            h.hop_latency = Some(r.u32("hop latency")?);
        }
        if ins & INS_QUEUE != 0 {
            let q = r.u32("hop queue")?;
            h.queue_id = Some((q >> 24) as u8);
            h.queue_occupancy = Some(q & 0xff_ffff);
        }
        if ins & INS_INGRESS_TS != 0 {
            h.ingress_ts = Some(r.u64("hop ingress timestamp")?);
        }
        if ins & INS_EGRESS_TS != 0 {
            h.egress_ts = Some(r.u64("hop egress timestamp")?);
        }
        if ins & INS_L2_PORTS != 0 {
            r.take(8, "hop level-2 ports")?;
        }
        if ins & INS_TX_UTIL != 0 {
            r.take(4, "hop tx utilisation")?;
        }
        if ins & INS_BUFFER != 0 {
            r.take(4, "hop buffer")?;
        }
        if ds_tx {
            h.tx_bytes = Some(r.u32("hop tx bytes")?);
        }
        if ins & INS_CHECKSUM_COMPLEMENT != 0 {
            r.take(4, "hop checksum complement")?;
        }
        if r.at - start != hop_ml * 4 {
            return err(format!(
                "hop of {} bytes but Hop ML says {} words",
                r.at - start,
                hop_ml
            ));
        }
        hops.push(h);
    }
    // The BTH follows the INT stack in a RoCEv2 packet: dest QP in bytes 5..8.
    let dst_qp = match r.b.get(r.at..r.at + 12) {
        Some(bth) if roce => Some(u32::from_be_bytes([0, bth[5], bth[6], bth[7]])),
        _ => None,
    };
    Ok(Report {
        node_id,
        seq_no,
        src,
        dst,
        dst_qp,
        wire_bytes: total_len.saturating_sub(len_words as u32 * 4),
        hops,
    })
}

/// Measured load of one switch egress port.
#[derive(Debug, Clone, Copy)]
pub struct PortLoad {
    pub rate_bps: f64,
    pub queue_packets: u32,
    pub updated: Instant,
}

#[derive(Clone, Copy)]
struct Sample {
    tx_bytes: u32,
    ts_us: u64,
}

/// Last sample and measured load, by (INT node id, port).
type PortState = HashMap<(u32, u16), (Sample, Option<PortLoad>)>;

/// Bytes a queued packet stands for when queue depths (BMv2 counts
/// packets) are reported in bytes.
pub const BYTES_PER_QUEUED_PACKET: u64 = 1024;

/// Settings of the derived signals.
#[derive(Debug, Clone, Copy)]
pub struct TelemetryConfig {
    /// A port is congested while reports see its queue above this many packets.
    pub congestion_queue_packets: u32,
    /// Reports above the threshold less than this apart (and no report
    /// below it in between) belong to one episode; an episode with no
    /// report above for this long is over.
    pub congestion_gap_ns: u64,
    /// Sinks report 1 in this many packets of a flow (the collector's
    /// `report_every`), so each report stands for this many packets.
    pub report_every: u16,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            congestion_queue_packets: 20,
            congestion_gap_ns: 10_000_000,
            report_every: 1,
        }
    }
}

impl TelemetryConfig {
    /// Packets one report stands for.
    pub fn report_weight(&self) -> u64 {
        u64::from(self.report_every.max(1))
    }
}

/// One congestion episode on a switch egress port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Episode {
    /// Increasing with the moment the episode ended (watchers resume after it).
    pub id: u64,
    pub edge: EdgeId,
    pub start_unix_ns: u64,
    /// The last report that saw the queue above the threshold.
    pub last_unix_ns: u64,
    pub peak_queue_packets: u32,
    /// Watched packets that saw the queue above the threshold (reports
    /// scaled by the sampling factor).
    pub packets: u64,
    /// Still going on.
    pub open: bool,
}

#[derive(Default)]
struct Congestion {
    open: HashMap<(u32, u16), Episode>,
    /// Finished episodes, oldest first (bounded).
    closed: VecDeque<Episode>,
    next_id: u64,
}

/// Finished episodes kept for watchers that have not seen them yet.
const CLOSED_EPISODES: usize = 4096;

impl Congestion {
    fn close(&mut self, key: (u32, u16)) {
        if let Some(mut e) = self.open.remove(&key) {
            self.next_id += 1;
            e.id = self.next_id;
            e.open = false;
            self.closed.push_back(e);
            if self.closed.len() > CLOSED_EPISODES {
                self.closed.pop_front();
            }
        }
    }

    fn expire(&mut self, now: u64, gap: u64) {
        let stale: Vec<(u32, u16)> = self
            .open
            .iter()
            .filter(|(_, e)| now.saturating_sub(e.last_unix_ns) > gap)
            .map(|(k, _)| *k)
            .collect();
        let mut stale = stale;
        stale.sort_by_key(|k| self.open[k].last_unix_ns);
        for k in stale {
            self.close(k);
        }
    }
}

/// What the reports of one watched flow showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowObservation {
    /// The first report of the flow (controller clock).
    pub first_seen_unix_ns: u64,
    pub last_seen_unix_ns: u64,
    /// Packets the reports stand for (reports x the sampling factor).
    pub reports: u64,
    /// (egress timestamp µs, tx bytes) of the flow's ingress hop in its
    /// first and latest report.
    first: (u64, u32),
    last: (u64, u32),
}

impl FlowObservation {
    /// Rate of the flow's ingress port between its first and latest
    /// report, from the tx bytes they carry; `None` until `min_span_us` of
    /// switch time separates them.
    pub fn rate_bps(&self, min_span_us: u64) -> Option<u64> {
        let span = self.last.0.checked_sub(self.first.0)?;
        if span < min_span_us.max(1) {
            return None;
        }
        let bytes = self.last.1.wrapping_sub(self.first.1);
        Some((u128::from(bytes) * 8 * 1_000_000 / u128::from(span)) as u64)
    }
}

/// A watched flow: source, destination, RoCE destination QP (if known).
type FlowKey = (Ipv4Addr, Ipv4Addr, Option<u32>);

/// Flows not seen for this long are forgotten.
const FLOW_IDLE_NS: u64 = 60_000_000_000;

/// The flows reports were seen for, ordered by (src, dst, QP) so that every
/// QP of a host pair is one range. Idle flows are pruned when the map has
/// doubled since the last pruning (at least 4,096): with many active flows,
/// a report does not walk them all.
struct FlowObservations {
    by_key: BTreeMap<FlowKey, FlowObservation>,
    prune_at: usize,
}

impl FlowObservations {
    const MIN_PRUNE_AT: usize = 4096;

    fn new() -> FlowObservations {
        FlowObservations {
            by_key: BTreeMap::new(),
            prune_at: Self::MIN_PRUNE_AT,
        }
    }

    /// Every QP's observation between the hosts.
    fn of_pair(&self, src: Ipv4Addr, dst: Ipv4Addr) -> impl Iterator<Item = &FlowObservation> {
        self.by_key
            .range((src, dst, None)..=(src, dst, Some(u32::MAX)))
            .map(|(_, o)| o)
    }

    fn prune_if_grown(&mut self, now_unix_ns: u64) {
        if self.by_key.len() > self.prune_at {
            self.by_key
                .retain(|_, o| now_unix_ns.saturating_sub(o.last_seen_unix_ns) < FLOW_IDLE_NS);
            self.prune_at = (2 * self.by_key.len()).max(Self::MIN_PRUNE_AT);
        }
    }
}

/// Per-port loads, congestion episodes and flow observations from reports.
pub struct LinkLoads {
    /// (switch name, topology port, edge) by (INT node id, device port).
    ports: HashMap<(u32, u16), (String, u16, EdgeId)>,
    config: TelemetryConfig,
    state: Mutex<PortState>,
    congestion: Mutex<Congestion>,
    flows: Mutex<FlowObservations>,
}

impl LinkLoads {
    #[cfg(test)]
    pub fn new(topo: &Topology) -> LinkLoads {
        LinkLoads::with_config(topo, &Devices::bmv2(), TelemetryConfig::default())
    }

    /// Loads of `topo`'s links, whose switches report the ports `devices`
    /// numbers (INT carries device ports).
    pub fn with_config(topo: &Topology, devices: &Devices, config: TelemetryConfig) -> LinkLoads {
        let mut ports = HashMap::new();
        for e in 0..topo.edge_count() as u32 {
            let l = topo.edge(e);
            if let NodeRef::Switch(s) = l.from {
                let sw = &topo.switches()[s as usize];
                let reported = devices.device_port(&sw.name, l.from_port);
                ports.insert((sw.id, reported), (sw.name.clone(), l.from_port, e));
            }
        }
        LinkLoads {
            ports,
            config,
            state: Mutex::new(HashMap::new()),
            congestion: Mutex::new(Congestion::default()),
            flows: Mutex::new(FlowObservations::new()),
        }
    }

    /// Account one report received now.
    pub fn record(&self, report: &Report) {
        self.record_at(report, super::clock::now_unix_ns());
    }

    /// Account one report received at `now_unix_ns`.
    pub fn record_at(&self, report: &Report, now_unix_ns: u64) {
        let now = Instant::now();
        {
            let mut state = self.state.lock().expect("loads lock");
            for h in &report.hops {
                let (Some(node), Some(reported), Some(tx), Some(ts)) =
                    (h.node_id, h.egress_port, h.tx_bytes, h.egress_ts)
                else {
                    continue;
                };
                let Some(&(_, port, _)) = self.ports.get(&(node, reported)) else {
                    continue;
                };
                let sample = Sample {
                    tx_bytes: tx,
                    ts_us: ts,
                };
                let queue = h.queue_occupancy.unwrap_or(0);
                let entry = state.entry((node, port)).or_insert((sample, None));
                let prev = entry.0;
                if ts > prev.ts_us {
                    let bytes = tx.wrapping_sub(prev.tx_bytes);
                    let rate = f64::from(bytes) * 8.0 / ((ts - prev.ts_us) as f64 / 1e6);
                    entry.1 = Some(PortLoad {
                        rate_bps: rate,
                        queue_packets: queue,
                        updated: now,
                    });
                    entry.0 = sample;
                } else if ts < prev.ts_us {
                    // Switch restarted (timestamps count from its start).
                    entry.0 = sample;
                }
            }
        }
        {
            let mut c = self.congestion.lock().expect("congestion lock");
            c.expire(now_unix_ns, self.config.congestion_gap_ns);
            for h in &report.hops {
                let (Some(node), Some(reported), Some(q)) =
                    (h.node_id, h.egress_port, h.queue_occupancy)
                else {
                    continue;
                };
                let Some(&(_, port, edge)) = self.ports.get(&(node, reported)) else {
                    continue;
                };
                if q > self.config.congestion_queue_packets {
                    let e = c.open.entry((node, port)).or_insert(Episode {
                        id: 0,
                        edge,
                        start_unix_ns: now_unix_ns,
                        last_unix_ns: now_unix_ns,
                        peak_queue_packets: 0,
                        packets: 0,
                        open: true,
                    });
                    e.last_unix_ns = now_unix_ns;
                    e.peak_queue_packets = e.peak_queue_packets.max(q);
                    e.packets += self.config.report_weight();
                } else {
                    c.close((node, port));
                }
            }
        }
        // The flow's ingress hop is the bottom of the stack.
        if let Some(h) = report.hops.last() {
            if let (Some(ts), Some(tx)) = (h.egress_ts, h.tx_bytes) {
                let mut flows = self.flows.lock().expect("flows lock");
                let key = (report.src, report.dst, report.dst_qp);
                let o = flows.by_key.entry(key).or_insert(FlowObservation {
                    first_seen_unix_ns: now_unix_ns,
                    last_seen_unix_ns: now_unix_ns,
                    reports: 0,
                    first: (ts, tx),
                    last: (ts, tx),
                });
                if ts < o.last.0 {
                    // The ingress switch restarted: measure from here.
                    o.first = (ts, tx);
                }
                o.last = (ts, tx);
                o.last_seen_unix_ns = now_unix_ns;
                o.reports += self.config.report_weight();
                flows.prune_if_grown(now_unix_ns);
            }
        }
    }

    /// Recent load of (switch, topology port), if a report measured it in the last
    /// `max_age`.
    pub fn load(
        &self,
        switch_id: u32,
        port: u16,
        max_age: std::time::Duration,
    ) -> Option<PortLoad> {
        let state = self.state.lock().expect("loads lock");
        state
            .get(&(switch_id, port))
            .and_then(|(_, l)| *l)
            .filter(|l| l.updated.elapsed() <= max_age)
    }

    /// Congestion episodes that ended after episode `after` (by id), then
    /// those still going on; and the id to resume after next time.
    pub fn congestion_since(&self, after: u64, now_unix_ns: u64) -> (Vec<Episode>, u64) {
        let mut c = self.congestion.lock().expect("congestion lock");
        c.expire(now_unix_ns, self.config.congestion_gap_ns);
        let mut out: Vec<Episode> = c.closed.iter().filter(|e| e.id > after).cloned().collect();
        let resume = out.last().map_or(after, |e| e.id);
        let mut open: Vec<Episode> = c.open.values().cloned().collect();
        open.sort_by_key(|e| (e.start_unix_ns, e.edge));
        out.extend(open);
        (out, resume)
    }

    /// When the flow (src, dst, QP) was last reported; with `qp` `None`,
    /// the latest of every QP between the hosts.
    pub fn last_seen(&self, src: Ipv4Addr, dst: Ipv4Addr, qp: Option<u32>) -> Option<u64> {
        let flows = self.flows.lock().expect("flows lock");
        match qp {
            Some(q) => flows
                .by_key
                .get(&(src, dst, Some(q)))
                .map(|o| o.last_seen_unix_ns),
            None => flows.of_pair(src, dst).map(|o| o.last_seen_unix_ns).max(),
        }
    }

    /// What the reports of flow (src, dst, QP) showed; with `qp` `None`
    /// (a reservation of every QP between the hosts), the earliest-seen
    /// flow between them.
    pub fn flow(&self, src: Ipv4Addr, dst: Ipv4Addr, qp: Option<u32>) -> Option<FlowObservation> {
        let flows = self.flows.lock().expect("flows lock");
        match qp {
            Some(q) => flows.by_key.get(&(src, dst, Some(q))).copied(),
            None => flows
                .of_pair(src, dst)
                .copied()
                .min_by_key(|o| o.first_seen_unix_ns),
        }
    }
}

/// How far observed traffic may stray from its forecast before the
/// controller signals a forecast mismatch.
#[derive(Debug, Clone, Copy)]
pub struct MismatchTolerance {
    /// The first report of a flow may come this much earlier or later than
    /// its forecast start; a flow not seen this long after its start has
    /// not started as forecast.
    pub start_ns: u64,
    /// The measured rate may differ from the forecast rate by this fraction.
    pub rate_fraction: f64,
    /// Switch time between two reports of a flow before its rate counts.
    pub min_span_us: u64,
}

impl Default for MismatchTolerance {
    fn default() -> Self {
        MismatchTolerance {
            start_ns: 20_000_000,
            rate_fraction: 0.25,
            min_span_us: 1_000,
        }
    }
}

/// What differs from a forecast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MismatchKind {
    /// Seen earlier or later than forecast, or not seen after the start.
    Start,
    /// Measured rate off the forecast rate.
    Rate,
}

/// The mismatches of a reserved flow forecast to start at `start` and run
/// at `bps` until `end`, given what its reports showed by `now`: each with
/// the observed start (`None`: not seen) and measured rate (0: unknown).
pub fn mismatches(
    start: u64,
    end: u64,
    bps: u64,
    seen: Option<FlowObservation>,
    now: u64,
    tol: MismatchTolerance,
) -> Vec<(MismatchKind, Option<u64>, u64)> {
    let mut out = Vec::new();
    let rate = seen.and_then(|o| o.rate_bps(tol.min_span_us));
    match seen {
        Some(o) if o.first_seen_unix_ns.abs_diff(start) > tol.start_ns => {
            out.push((
                MismatchKind::Start,
                Some(o.first_seen_unix_ns),
                rate.unwrap_or(0),
            ));
        }
        None if now > start.saturating_add(tol.start_ns) && now < end => {
            out.push((MismatchKind::Start, None, 0));
        }
        _ => {}
    }
    if let Some(r) = rate {
        if (r as f64 - bps as f64).abs() > tol.rate_fraction * bps as f64 {
            out.push((MismatchKind::Rate, seen.map(|o| o.first_seen_unix_ns), r));
        }
    }
    out
}

/// Receive reports on `socket` forever; each also feeds T+5 learning
/// when it is on.
pub async fn collect(
    socket: tokio::net::UdpSocket,
    loads: Arc<LinkLoads>,
    metrics: Arc<Metrics>,
    learning: Option<Arc<Mutex<Learning>>>,
) {
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        match parse_report(&buf[..n]) {
            Ok(report) => {
                metrics.int_reports.inc();
                loads.record(&report);
                if let Some(l) = &learning {
                    // A sampled report stands for its flow's unsampled packets.
                    let bytes = u64::from(report.wire_bytes) * loads.config.report_weight();
                    let now = super::clock::now_unix_ns();
                    l.lock()
                        .expect("learning lock")
                        .record(report.src, report.dst, bytes, now);
                }
            }
            Err(e) => {
                metrics.int_bad_reports.inc();
                tracing::debug!(%from, %e, "not a telemetry report");
            }
        }
    }
}

#[cfg(test)]
pub mod tests {
    use testkit::int::{report as report_bytes, report_to_qp};

    use super::*;

    #[test]
    fn parses_the_sink_first_stack() {
        let bytes = report_bytes(
            2,
            9,
            &[
                (2, 3, 1, 4, 1_000, 500),
                (3, 1, 2, 0, 990, 7_000),
                (1, 1, 3, 1, 980, 9_000),
            ],
        );
        let r = parse_report(&bytes).unwrap();
        assert_eq!((r.node_id, r.seq_no), (2, 9));
        assert_eq!(
            (r.src, r.dst),
            ("10.0.1.1".parse().unwrap(), "10.0.2.1".parse().unwrap())
        );
        assert_eq!(r.hops.len(), 3);
        assert_eq!(r.hops[0].node_id, Some(2));
        assert_eq!(r.hops[0].egress_port, Some(1));
        assert_eq!(r.hops[0].queue_id, Some(3));
        assert_eq!(r.hops[0].queue_occupancy, Some(4));
        assert_eq!(r.hops[2].egress_ts, Some(980));
        assert_eq!(r.hops[2].tx_bytes, Some(9_000));
    }

    #[test]
    fn rejects_what_is_not_a_report() {
        assert!(parse_report(&[0; 4]).is_err());
        let mut bytes = report_bytes(2, 1, &[(2, 3, 1, 0, 1, 1)]);
        bytes.truncate(bytes.len() - 20);
        let e = parse_report(&bytes).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
    }

    fn topo() -> Topology {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
        );
        planner::topology::yaml::load_file(path).unwrap()
    }

    #[test]
    fn queue_buildup_is_coalesced_into_episodes_per_port() {
        let topo = topo();
        let loads = LinkLoads::with_config(
            &topo,
            &Devices::bmv2(),
            TelemetryConfig {
                congestion_queue_packets: 10,
                congestion_gap_ns: 5_000,
                report_every: 1,
            },
        );
        let r = |seq, hops: &[(u32, u16, u16, u32, u64, u32)]| {
            parse_report(&report_bytes(2, seq, hops)).unwrap()
        };
        // leaf1 (1) port 3 above 10 three times in a row, spine1 (3) port 2 once.
        loads.record_at(&r(1, &[(3, 1, 2, 30, 5, 0), (1, 1, 3, 11, 1, 0)]), 1_000);
        loads.record_at(&r(2, &[(1, 1, 3, 40, 2, 0)]), 2_000);
        loads.record_at(&r(3, &[(1, 1, 3, 12, 3, 0)]), 6_000);
        let (now, after) = loads.congestion_since(0, 6_000);
        assert_eq!(after, 0, "nothing finished yet");
        assert_eq!(now.len(), 2);
        assert!(now.iter().all(|e| e.open));
        // Below the threshold: leaf1:3's episode ends; then a new one.
        loads.record_at(&r(4, &[(1, 1, 3, 3, 4, 0)]), 7_000);
        loads.record_at(&r(5, &[(1, 1, 3, 50, 5, 0)]), 8_000);
        let (eps, after) = loads.congestion_since(0, 8_000);
        let leaf1_3 = (0..topo.edge_count() as u32)
            .find(|&e| topo.describe_edge(e).starts_with("leaf1:3"))
            .unwrap();
        let closed: Vec<&Episode> = eps.iter().filter(|e| !e.open).collect();
        // spine1:2 ended by the gap (last seen 1 000, > 5 000 ago at 7 000).
        assert_eq!(closed.len(), 2, "{eps:?}");
        let first = closed.iter().find(|e| e.edge == leaf1_3).unwrap();
        assert_eq!(
            (
                first.start_unix_ns,
                first.last_unix_ns,
                first.peak_queue_packets,
                first.packets
            ),
            (1_000, 6_000, 40, 3)
        );
        let open: Vec<&Episode> = eps.iter().filter(|e| e.open).collect();
        assert_eq!(open.len(), 1);
        assert_eq!(
            (
                open[0].edge,
                open[0].start_unix_ns,
                open[0].peak_queue_packets
            ),
            (leaf1_3, 8_000, 50)
        );
        // Resuming after them: only the one still going on.
        let (again, same) = loads.congestion_since(after, 8_100);
        assert_eq!(same, after);
        assert_eq!(again.len(), 1);
        assert!(again[0].open);
    }

    #[test]
    fn sampled_reports_count_for_the_packets_they_stand_for() {
        let topo = topo();
        let config = TelemetryConfig {
            congestion_queue_packets: 10,
            congestion_gap_ns: 5_000,
            report_every: 16,
        };
        let loads = LinkLoads::with_config(&topo, &Devices::bmv2(), config);
        let mut last = None;
        for (seq, at) in [(1, 1_000), (2, 2_000)] {
            let b = report_to_qp(2, seq, 700, &[(1, 1, 3, 30, seq as u64 * 10, 0)]);
            let r = parse_report(&b).unwrap();
            loads.record_at(&r, at);
            last = Some(r);
        }
        let r = last.unwrap();
        let (eps, _) = loads.congestion_since(0, 2_000);
        assert_eq!(eps.len(), 1);
        assert_eq!(eps[0].packets, 2 * 16, "two reports of 1 in 16 packets");
        let seen = loads
            .flow(r.src, r.dst, Some(700))
            .expect("the flow was reported");
        assert_eq!(seen.reports, 2 * 16);
        // 0 is read as 1 (every packet), as the data plane does.
        assert_eq!(
            TelemetryConfig {
                report_every: 0,
                ..config
            }
            .report_weight(),
            1
        );
    }

    #[test]
    fn a_host_pairs_qps_are_one_range_and_idle_flows_are_pruned_when_the_map_doubles() {
        let ip = |s: &str| -> Ipv4Addr { s.parse().unwrap() };
        let seen = |t: u64| FlowObservation {
            first_seen_unix_ns: t,
            last_seen_unix_ns: t,
            reports: 1,
            first: (0, 0),
            last: (0, 0),
        };
        let (a, b, c) = (ip("10.0.1.1"), ip("10.0.2.1"), ip("10.0.2.2"));
        let mut flows = FlowObservations::new();
        for (key, t) in [
            ((a, b, None), 1),
            ((a, b, Some(0)), 2),
            ((a, b, Some(u32::MAX)), 3),
            ((a, c, Some(7)), 4),
            ((b, a, Some(7)), 5),
        ] {
            flows.by_key.insert(key, seen(t));
        }
        let of = |x, y| -> Vec<u64> { flows.of_pair(x, y).map(|o| o.last_seen_unix_ns).collect() };
        assert_eq!(of(a, b), [1, 2, 3]);
        assert_eq!(of(a, c), [4]);
        assert_eq!(of(c, a), Vec::<u64>::new());
        // 4,097 flows: 4,000 idle for over a minute, 97 recent.
        let now = FLOW_IDLE_NS + 1_000;
        let mut flows = FlowObservations::new();
        for q in 0..4097u32 {
            let t = if q < 4000 { 0 } else { now };
            flows.by_key.insert((a, b, Some(q)), seen(t));
        }
        flows.prune_if_grown(now);
        assert_eq!(flows.by_key.len(), 97);
        assert_eq!(flows.prune_at, 4096);
        // 10,000 active flows: pruned at 4,097 and 8,195 only.
        let mut flows = FlowObservations::new();
        let mut prunes = 0;
        for q in 0..10_000u32 {
            flows.by_key.insert((a, b, Some(q)), seen(now));
            let before = flows.prune_at;
            flows.prune_if_grown(now);
            prunes += usize::from(flows.prune_at != before);
        }
        assert_eq!(
            (flows.by_key.len(), prunes, flows.prune_at),
            (10_000, 2, 16_390)
        );
    }

    #[test]
    fn flows_are_observed_by_their_bth_qp_and_mismatches_found() {
        let topo = topo();
        let loads = LinkLoads::new(&topo);
        let b = report_to_qp(
            2,
            1,
            700,
            &[(2, 3, 1, 0, 10_000, 0), (1, 1, 3, 0, 10_000, 1_000)],
        );
        let first = parse_report(&b).unwrap();
        assert_eq!(first.dst_qp, Some(700));
        loads.record_at(&first, 5_000_000);
        let b2 = report_to_qp(
            2,
            2,
            700,
            &[(2, 3, 1, 0, 20_000, 0), (1, 1, 3, 0, 20_000, 1_251_000)],
        );
        loads.record_at(&parse_report(&b2).unwrap(), 15_000_000);
        let (src, dst) = ("10.0.1.1".parse().unwrap(), "10.0.2.1".parse().unwrap());
        let o = loads.flow(src, dst, Some(700)).unwrap();
        assert_eq!((o.first_seen_unix_ns, o.reports), (5_000_000, 2));
        // 1 250 000 bytes in 10 ms of the ingress leaf's port: 1 Gbit/s.
        assert_eq!(o.rate_bps(1_000), Some(1_000_000_000));
        assert!(loads.flow(src, dst, Some(701)).is_none());
        assert_eq!(loads.flow(src, dst, None), Some(o));

        let tol = MismatchTolerance {
            start_ns: 2_000_000,
            rate_fraction: 0.25,
            min_span_us: 1_000,
        };
        // As forecast: started at 4 ms (seen at 5), 1.1 Gbit/s.
        assert!(mismatches(
            4_000_000,
            100_000_000,
            1_100_000_000,
            Some(o),
            20_000_000,
            tol
        )
        .is_empty());
        // Forecast 10 ms: seen 5 ms early. Forecast 2 Gbit/s: half of it.
        assert_eq!(
            mismatches(
                10_000_000,
                100_000_000,
                2_000_000_000,
                Some(o),
                20_000_000,
                tol
            ),
            vec![
                (MismatchKind::Start, Some(5_000_000), 1_000_000_000),
                (MismatchKind::Rate, Some(5_000_000), 1_000_000_000)
            ]
        );
        // Not seen: only once the start tolerance has passed.
        assert!(mismatches(10_000_000, 100_000_000, 1, None, 11_000_000, tol).is_empty());
        assert_eq!(
            mismatches(10_000_000, 100_000_000, 1, None, 13_000_000, tol),
            vec![(MismatchKind::Start, None, 0)]
        );
    }

    #[test]
    fn two_reports_give_a_port_rate() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
        );
        let topo = planner::topology::yaml::load_file(path).unwrap();
        let loads = LinkLoads::new(&topo);
        // leaf1 (id 1) port 3: 125 000 bytes in 10 ms = 100 Mbit/s.
        loads.record(&parse_report(&report_bytes(2, 1, &[(1, 1, 3, 0, 10_000, 1_000)])).unwrap());
        loads.record(&parse_report(&report_bytes(2, 2, &[(1, 1, 3, 7, 20_000, 126_000)])).unwrap());
        let l = loads.load(1, 3, std::time::Duration::from_secs(5)).unwrap();
        assert!((l.rate_bps - 100e6).abs() < 1.0, "{}", l.rate_bps);
        assert_eq!(l.queue_packets, 7);
        assert!(loads
            .load(1, 4, std::time::Duration::from_secs(5))
            .is_none());
    }

    #[test]
    fn reports_in_device_ports_land_on_topology_ports() {
        use installer::device::{PortMap, Target};
        let topo = topo();
        let map = PortMap::new(
            "leaf1",
            [(1, 128), (2, 136), (3, 144), (4, 152)].into(),
            &[1, 2, 3, 4],
        )
        .unwrap();
        let devices = Devices::new(Target::Tofino, [("leaf1".to_string(), map)].into());
        let loads = LinkLoads::with_config(
            &topo,
            &devices,
            TelemetryConfig {
                congestion_queue_packets: 10,
                congestion_gap_ns: 5_000,
                report_every: 1,
            },
        );
        // leaf1 (id 1) reports device port 144, its topology port 3.
        loads.record_at(
            &parse_report(&report_bytes(2, 1, &[(1, 128, 144, 20, 10_000, 1_000)])).unwrap(),
            1,
        );
        loads.record_at(
            &parse_report(&report_bytes(2, 2, &[(1, 128, 144, 30, 20_000, 126_000)])).unwrap(),
            2,
        );
        let l = loads.load(1, 3, std::time::Duration::from_secs(5)).unwrap();
        assert!((l.rate_bps - 100e6).abs() < 1.0, "{}", l.rate_bps);
        assert!(loads
            .load(1, 144, std::time::Duration::from_secs(5))
            .is_none());
        let (episodes, _) = loads.congestion_since(0, 3);
        let leaf1_port3 = (0..topo.edge_count() as u32)
            .find(|&e| {
                let l = topo.edge(e);
                l.from == NodeRef::Switch(topo.switch_by_name("leaf1").unwrap()) && l.from_port == 3
            })
            .unwrap();
        assert_eq!(episodes.len(), 1);
        assert_eq!(episodes[0].edge, leaf1_port3);
        // A device port the map does not know is no link of the fabric.
        loads.record_at(
            &parse_report(&report_bytes(2, 3, &[(1, 128, 3, 0, 30_000, 1)])).unwrap(),
            4,
        );
        assert_eq!(
            loads
                .load(1, 3, std::time::Duration::from_secs(5))
                .unwrap()
                .queue_packets,
            30
        );
    }
}
