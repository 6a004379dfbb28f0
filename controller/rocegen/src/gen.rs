//! Spec generators (ring all-reduce, all-to-all, background flows), kept
//! here rather than in the experiment runner so they are unit-tested.

use std::collections::{BTreeMap, HashSet};

use anyhow::{bail, Context, Result};

use crate::dcqcn::DcqcnParams;
use crate::spec::{Flow, Kind, Spec, QP_MAX};

/// Smallest QP number drawn (below it are well-known/reserved QPs in practice).
pub const QP_DRAW_MIN: u32 = 0x100;

/// The project's convention: UDP source port derived from the dest QP.
pub fn udp_port_for(dest_qp: u32) -> u16 {
    49152 + (dest_qp % 16384) as u16
}

/// splitmix64: tiny, seedable, good enough to spread QP numbers.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in lo..=hi (modulo bias is negligible for 24-bit ranges).
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next_u64() % u64::from(hi - lo + 1)) as u32
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Hands out QP numbers unique per host, deterministically from the seed.
struct QpAlloc {
    rng: SplitMix64,
    used: HashSet<(String, u32)>,
}

impl QpAlloc {
    fn new(seed: u64) -> Self {
        QpAlloc {
            rng: SplitMix64::new(seed),
            used: HashSet::new(),
        }
    }
    fn draw(&mut self, host: &str) -> u32 {
        loop {
            let q = self.rng.range(QP_DRAW_MIN, QP_MAX);
            if self.used.insert((host.to_string(), q)) {
                return q;
            }
        }
    }
    /// One connection src->dst: (src_qp, dest_qp).
    fn pair(&mut self, src: &str, dst: &str) -> (u32, u32) {
        let d = self.draw(dst);
        let s = self.draw(src);
        (s, d)
    }
}

/// Common generator options.
#[derive(Debug, Clone)]
pub struct GenOpts {
    /// Hosts in ring order: (name, IPv4).
    pub hosts: Vec<(String, String)>,
    pub bytes: u64,
    pub qp_seed: u64,
    pub line_rate_pps: f64,
    pub payload_bytes: u32,
    pub dscp: u8,
    pub start_unix_ns: u64,
    pub background: Vec<Background>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Background {
    pub src: String,
    pub dst: String,
    pub bytes: u64,
    pub rate_pps: f64,
}

impl std::str::FromStr for Background {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split(':').collect();
        let [src, dst, bytes, rate] = parts[..] else {
            bail!("background \"{s}\": expected SRC:DST:BYTES:RATE_PPS");
        };
        Ok(Background {
            src: src.into(),
            dst: dst.into(),
            bytes: bytes
                .parse()
                .with_context(|| format!("background \"{s}\": BYTES"))?,
            rate_pps: rate
                .parse()
                .with_context(|| format!("background \"{s}\": RATE_PPS"))?,
        })
    }
}

/// Parses `h1=10.0.1.1,h2=10.0.1.2` keeping the order.
pub fn parse_hosts(s: &str) -> Result<Vec<(String, String)>> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, ip) = p
                .split_once('=')
                .with_context(|| format!("--hosts: \"{p}\" is not NAME=IPv4"))?;
            Ok((n.trim().to_string(), ip.trim().to_string()))
        })
        .collect()
}

fn base(o: &GenOpts) -> Spec {
    Spec {
        start_unix_ns: o.start_unix_ns,
        payload_bytes: o.payload_bytes,
        dcqcn: DcqcnParams::default(),
        hosts: o.hosts.iter().cloned().collect::<BTreeMap<_, _>>(),
        flows: Vec::new(),
    }
}

#[allow(clippy::too_many_arguments)]
fn mk_flow(
    id: String,
    kind: Kind,
    src: &str,
    dst: &str,
    (src_qp, dest_qp): (u32, u32),
    bytes: u64,
    rate: f64,
    dscp: u8,
    after: Vec<String>,
) -> Flow {
    Flow {
        id,
        kind,
        src: src.into(),
        dst: dst.into(),
        src_qp,
        dest_qp,
        udp_src_port: udp_port_for(dest_qp),
        bytes,
        line_rate_pps: rate,
        dscp,
        start_offset_ns: 0,
        stop_offset_ns: None,
        after,
    }
}

fn add_background(o: &GenOpts, qps: &mut QpAlloc, spec: &mut Spec) {
    for (k, b) in o.background.iter().enumerate() {
        let pair = qps.pair(&b.src, &b.dst);
        spec.flows.push(mk_flow(
            format!("bg{k}-{}-{}", b.src, b.dst),
            Kind::Background,
            &b.src,
            &b.dst,
            pair,
            b.bytes,
            b.rate_pps,
            o.dscp,
            vec![],
        ));
    }
}

/// Ring flow id: channel, step, sending host.
pub fn ring_id(channel: usize, step: usize, host: &str) -> String {
    format!("ring-c{channel}-s{step}-{host}")
}

/// Ring all-reduce: 2(N-1) steps (reduce-scatter then all-gather); at each
/// step rank i sends one chunk to rank i+1 on each of K channels, once it has
/// received the previous step's chunk from rank i-1 on that channel.
pub fn ring_allreduce(o: &GenOpts, channels: usize) -> Result<Spec> {
    let n = o.hosts.len();
    if n < 2 {
        bail!("--hosts: ring all-reduce needs at least 2 hosts");
    }
    if channels == 0 {
        bail!("--channels: must be >= 1");
    }
    let mut spec = base(o);
    let mut qps = QpAlloc::new(o.qp_seed);
    let name = |i: usize| o.hosts[i % n].0.as_str();
    // One connection per (rank -> rank+1, channel), reused by every step.
    // Indexed by i * channels + c.
    let conn: Vec<(u32, u32)> = (0..n * channels)
        .map(|k| qps.pair(name(k / channels), name(k / channels + 1)))
        .collect();
    // N*K pieces (chunk, channel) spread the remainder over the first ones.
    let pieces = (n * channels) as u64;
    let piece = |chunk: usize, c: usize| {
        let j = (chunk * channels + c) as u64;
        o.bytes / pieces + u64::from(j < o.bytes % pieces)
    };
    for s in 0..2 * (n - 1) {
        for c in 0..channels {
            for i in 0..n {
                let chunk = (i + n - s % n) % n;
                let bytes = piece(chunk, c);
                if bytes == 0 {
                    bail!(
                        "--bytes: {} too small for {n} hosts x {channels} channels",
                        o.bytes
                    );
                }
                let after = if s == 0 {
                    vec![]
                } else {
                    vec![ring_id(c, s - 1, name(i + n - 1))]
                };
                spec.flows.push(mk_flow(
                    ring_id(c, s, name(i)),
                    Kind::Collective,
                    name(i),
                    name(i + 1),
                    conn[i * channels + c],
                    bytes,
                    o.line_rate_pps,
                    o.dscp,
                    after,
                ));
            }
        }
    }
    add_background(o, &mut qps, &mut spec);
    spec.validate()?;
    Ok(spec)
}

/// All-to-all: every host sends bytes/(N-1) to every other host at once.
pub fn all_to_all(o: &GenOpts) -> Result<Spec> {
    let n = o.hosts.len();
    if n < 2 {
        bail!("--hosts: all-to-all needs at least 2 hosts");
    }
    let per = o.bytes / (n as u64 - 1);
    if per == 0 {
        bail!("--bytes: {} too small for {n} hosts", o.bytes);
    }
    let mut spec = base(o);
    let mut qps = QpAlloc::new(o.qp_seed);
    for (s, (src, _)) in o.hosts.iter().enumerate() {
        for (d, (dst, _)) in o.hosts.iter().enumerate() {
            if s != d {
                let pair = qps.pair(src, dst);
                spec.flows.push(mk_flow(
                    format!("a2a-{src}-{dst}"),
                    Kind::Collective,
                    src,
                    dst,
                    pair,
                    per,
                    o.line_rate_pps,
                    o.dscp,
                    vec![],
                ));
            }
        }
    }
    add_background(o, &mut qps, &mut spec);
    spec.validate()?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn opts(n: usize, bytes: u64) -> GenOpts {
        GenOpts {
            hosts: (0..n)
                .map(|i| (format!("h{i}"), format!("10.0.1.{}", i + 1)))
                .collect(),
            bytes,
            qp_seed: 7,
            line_rate_pps: 400.0,
            payload_bytes: 1024,
            dscp: 24,
            start_unix_ns: 5,
            background: vec![],
        }
    }

    #[test]
    fn splitmix_reference_values() {
        // First outputs for seed 0 of the published splitmix64 algorithm.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn ring_shape_bytes_and_dependencies() {
        let (n, k, bytes) = (4usize, 2usize, 4 * 2 * 1024 * 10u64);
        let spec = ring_allreduce(&opts(n, bytes), k).unwrap();
        assert_eq!(spec.flows.len(), 2 * (n - 1) * k * n);
        let by_id: HashMap<&str, &Flow> = spec.flows.iter().map(|f| (f.id.as_str(), f)).collect();
        for i in 0..n {
            let h = format!("h{i}");
            let sent: u64 = spec
                .flows
                .iter()
                .filter(|f| f.src == h)
                .map(|f| f.bytes)
                .sum();
            assert_eq!(sent, 2 * (n as u64 - 1) * bytes / n as u64, "rank {i}");
        }
        let f = by_id["ring-c1-s3-h2"];
        assert_eq!((f.src.as_str(), f.dst.as_str()), ("h2", "h3"));
        assert_eq!(f.after, vec!["ring-c1-s2-h1".to_string()]);
        assert!(by_id["ring-c0-s0-h0"].after.is_empty());
        // Wraps around: rank 0 depends on rank N-1.
        assert_eq!(
            by_id["ring-c0-s1-h0"].after,
            vec!["ring-c0-s0-h3".to_string()]
        );
        // Same QP pair for every step of a channel, distinct across channels.
        let a = by_id["ring-c0-s0-h1"];
        let b = by_id["ring-c0-s5-h1"];
        let c = by_id["ring-c1-s0-h1"];
        assert_eq!((a.src_qp, a.dest_qp), (b.src_qp, b.dest_qp));
        assert_ne!(a.dest_qp, c.dest_qp);
        assert_eq!(a.udp_src_port, udp_port_for(a.dest_qp));
        assert!(a.dest_qp >= QP_DRAW_MIN && a.dest_qp <= QP_MAX);
    }

    #[test]
    fn ring_qps_unique_per_host_and_seeded() {
        let spec = ring_allreduce(&opts(5, 1 << 20), 3).unwrap();
        let mut ends: HashMap<(String, u32), (String, u32)> = HashMap::new();
        for f in &spec.flows {
            for (h, q, peer) in [
                (&f.src, f.src_qp, (f.dst.clone(), f.dest_qp)),
                (&f.dst, f.dest_qp, (f.src.clone(), f.src_qp)),
            ] {
                let prev = ends.insert((h.clone(), q), peer.clone());
                assert!(
                    prev.is_none() || prev == Some(peer),
                    "QP {q:#x} reused on {h}"
                );
            }
        }
        // 5 hosts x 3 channels x (1 send + 1 recv end) distinct endpoints.
        assert_eq!(ends.len(), 5 * 3 * 2);
        let again = ring_allreduce(&opts(5, 1 << 20), 3).unwrap();
        assert_eq!(again, spec, "deterministic for a seed");
        let mut o = opts(5, 1 << 20);
        o.qp_seed = 8;
        assert_ne!(
            ring_allreduce(&o, 3).unwrap().flows[0].dest_qp,
            spec.flows[0].dest_qp
        );
    }

    #[test]
    fn ring_uneven_bytes_spread() {
        let spec = ring_allreduce(&opts(3, 1000), 2).unwrap();
        // Each step moves every chunk once across the ring: per step, all
        // ranks together send the whole buffer.
        let step0: u64 = spec
            .flows
            .iter()
            .filter(|f| f.id.contains("-s0-"))
            .map(|f| f.bytes)
            .sum();
        assert_eq!(step0, 1000);
        assert!(ring_allreduce(&opts(3, 5), 2).is_err());
    }

    #[test]
    fn all_to_all_and_background() {
        let mut o = opts(3, 3000);
        o.background = vec!["h0:h2:100000:200".parse().unwrap()];
        let spec = all_to_all(&o).unwrap();
        assert_eq!(spec.flows.len(), 3 * 2 + 1);
        assert!(spec.flows[..6]
            .iter()
            .all(|f| f.bytes == 1500 && f.after.is_empty()));
        let bg = &spec.flows[6];
        assert_eq!(bg.kind, Kind::Background);
        assert_eq!((bg.bytes, bg.line_rate_pps), (100_000, 200.0));
        assert_eq!(bg.id, "bg0-h0-h2");
        o.background = vec!["h0:h9:1:1".parse().unwrap()];
        let e = format!("{:#}", all_to_all(&o).unwrap_err());
        assert!(e.contains("unknown host \"h9\""), "{e}");
        assert!("h0:h1:x:1".parse::<Background>().is_err());
        assert!("h0:h1:1".parse::<Background>().is_err());
    }

    #[test]
    fn hosts_parsing() {
        let h = parse_hosts("h1=10.0.1.1,h2=10.0.1.2").unwrap();
        assert_eq!(h[1], ("h2".to_string(), "10.0.1.2".to_string()));
        assert!(parse_hosts("h1:10.0.1.1").is_err());
    }
}
