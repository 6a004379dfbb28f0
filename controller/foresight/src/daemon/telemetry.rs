//! The INT collector: Telemetry Report v2.0 datagrams from the sink leaves
//! (`p4src/include/int.p4`: one individual report, INT-MD over UDP inner
//! packet, sink's entry on top of the stack) parsed into per-hop metadata,
//! and per-link load from them: every hop stamps its egress port's
//! transmitted bytes (Foresight domain-specific metadata) and its egress
//! timestamp, so two reports through the same port give its rate.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use planner::topology::NodeRef;
use planner::Topology;

use super::metrics::Metrics;

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
    let src = Ipv4Addr::new(ip[11], ip[12], ip[13], ip[14]);
    let dst = Ipv4Addr::new(ip[15], ip[16], ip[17], ip[18]);
    r.take(8, "inner UDP")?;
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
    Ok(Report {
        node_id,
        seq_no,
        src,
        dst,
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

/// Per-port loads from reports.
pub struct LinkLoads {
    /// (switch name, port) by (INT node id, port).
    ports: HashMap<(u32, u16), (String, u16)>,
    state: Mutex<PortState>,
}

impl LinkLoads {
    pub fn new(topo: &Topology) -> LinkLoads {
        let mut ports = HashMap::new();
        for e in 0..topo.edge_count() as u32 {
            let l = topo.edge(e);
            if let NodeRef::Switch(s) = l.from {
                let sw = &topo.switches()[s as usize];
                ports.insert((sw.id, l.from_port), (sw.name.clone(), l.from_port));
            }
        }
        LinkLoads {
            ports,
            state: Mutex::new(HashMap::new()),
        }
    }

    /// Account one report.
    pub fn record(&self, report: &Report) {
        let now = Instant::now();
        let mut state = self.state.lock().expect("loads lock");
        for h in &report.hops {
            let (Some(node), Some(port), Some(tx), Some(ts)) =
                (h.node_id, h.egress_port, h.tx_bytes, h.egress_ts)
            else {
                continue;
            };
            if !self.ports.contains_key(&(node, port)) {
                continue;
            }
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

    /// Recent load of (switch, port), if a report measured it in the last
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
}

/// Receive reports on `socket` forever.
pub async fn collect(socket: tokio::net::UdpSocket, loads: Arc<LinkLoads>, metrics: Arc<Metrics>) {
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        match parse_report(&buf[..n]) {
            Ok(report) => {
                metrics.int_reports.fetch_add(1, Ordering::Relaxed);
                loads.record(&report);
            }
            Err(e) => {
                metrics.int_bad_reports.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%from, %e, "not a telemetry report");
            }
        }
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A report as `int.p4` builds it (UDP payload): instructions 0xF400,
    /// Foresight DS 0x8000, so 7 words per hop; `hops` = (node, in, out,
    /// queue occupancy, egress ts, tx bytes), sink first.
    pub fn report_bytes(sink: u32, seq: u32, hops: &[(u32, u16, u16, u32, u64, u32)]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&((2u32 << 28) | seq).to_be_bytes());
        b.extend_from_slice(&sink.to_be_bytes());
        let inner_words = (20 + 8 + 4 + 12 + hops.len() * 28 + 12) / 4;
        b.extend_from_slice(&[0x14, inner_words as u8, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0]);
        // Inner IPv4 (no options), UDP to 4791.
        b.extend_from_slice(&[
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 2, 1,
        ]);
        b.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0, 0, 0, 0]);
        // Shim: type 1, len = 3 + 7 per hop.
        b.extend_from_slice(&[0x10, (3 + 7 * hops.len()) as u8, 0, 0]);
        // INT-MD: ver 2, hop_ml 7, remaining 4; ins, domain, ds, flags.
        b.extend_from_slice(&((2u32 << 28) | (7 << 8) | 4).to_be_bytes());
        b.extend_from_slice(&[0xf4, 0x00, 0x46, 0x53, 0x80, 0x00, 0, 0]);
        for &(node, ip, ep, occ, ts, tx) in hops {
            b.extend_from_slice(&node.to_be_bytes());
            b.extend_from_slice(&ip.to_be_bytes());
            b.extend_from_slice(&ep.to_be_bytes());
            b.extend_from_slice(&5u32.to_be_bytes());
            b.extend_from_slice(&((3u32 << 24) | occ).to_be_bytes());
            b.extend_from_slice(&ts.to_be_bytes());
            b.extend_from_slice(&tx.to_be_bytes());
        }
        b.extend_from_slice(&[0u8; 12]); // BTH
        b
    }

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
}
