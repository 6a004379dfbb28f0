//! The demand model: what a workload announces ([`DemandSignal`], or a
//! collective in a demand file) and the flows it becomes ([`Flow`]).
//!
//! Times are nanoseconds (see [`crate::conventions::NS_PER_SEC`]); rates are
//! bit/s internally and Gbit/s in files.

use std::collections::HashSet;

use serde::{Deserialize, Deserializer, Serialize};

use crate::collectives::{self, Collective, CollectiveKind};
use crate::conventions::gbps_to_bps;
use crate::topology::Topology;

pub use crate::flow::{Flow, QpAllocator};

/// A demand as the planner sees it: the announcement's policy fields and
/// the flows it expands to.
#[derive(Clone, Debug)]
pub struct Demand {
    /// Unique id.
    pub id: String,
    /// Tenant (owner).
    pub tenant: String,
    /// Higher is planned first (0..=255).
    pub priority: u8,
    /// May be started later than asked, up to the deadline.
    pub elastic: bool,
    /// Must complete by this time (ns), if set.
    pub deadline_ns: Option<u64>,
    /// What it is.
    pub kind: DemandKind,
    /// Its flows.
    pub flows: Vec<Flow>,
}

/// Point-to-point or a collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemandKind {
    /// One transfer between two NICs (possibly over several QPs).
    Transfer,
    /// A collective.
    Collective(CollectiveKind),
}

impl Demand {
    /// Earliest flow start (0 if no flows).
    pub fn start_ns(&self) -> u64 {
        self.flows.iter().map(|f| f.start_ns).min().unwrap_or(0)
    }
    /// Latest flow end (0 if no flows).
    pub fn end_ns(&self) -> u64 {
        self.flows.iter().map(|f| f.end_ns()).max().unwrap_or(0)
    }
}

/// A point-to-point demand signal (what NDSP carries).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DemandSignal {
    /// Unique id.
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// Source host name.
    pub src: String,
    /// Destination host name.
    pub dst: String,
    /// Start offset, ns.
    pub start_ns: u64,
    /// Bytes.
    pub bytes: u64,
    /// Duration, ns (give this or `rate_gbps`, or neither for line rate).
    pub duration_ns: Option<u64>,
    /// Rate, Gbit/s.
    pub rate_gbps: Option<f64>,
    /// Priority, higher first.
    pub priority: u8,
    /// May be deferred up to the deadline.
    pub elastic: bool,
    /// Completion deadline, ns.
    pub deadline_ns: Option<u64>,
    /// Number of QPs to spread the bytes over (default 1).
    pub qps: u32,
}

/// A problem in a demand file or signal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemandIssue {
    /// `demands[3] 'ckpt-7'`.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for DemandIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// Why demands could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DemandError {
    /// Not valid YAML / wrong shape.
    #[error("{0}")]
    Parse(String),
    /// Parsed, but some entries are wrong.
    #[error("{} invalid demand(s):\n{}", .0.len(), .0.iter().map(|i| format!("  - {i}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<DemandIssue>),
    /// Reading the file failed.
    #[error("{path}: {io}")]
    Io {
        /// File.
        path: String,
        /// OS error.
        io: std::io::Error,
    },
}

/// Parses a byte count: an integer, or a number with a unit `B`, `KB`,
/// `MB`, `GB`, `TB` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num = num.trim();
    let mult: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0f64.powi(4),
        u => {
            return Err(format!(
                "'{s}': unknown unit '{u}' (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}': '{num}' is not a number"))?;
    let b = v * mult;
    if !b.is_finite() || b < 1.0 || b > u64::MAX as f64 {
        return Err(format!("'{s}': must be at least 1 byte"));
    }
    Ok(b.round() as u64)
}

fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum B {
        N(u64),
        F(f64),
        S(String),
    }
    match Option::<B>::deserialize(d)? {
        None => Ok(None),
        Some(B::N(n)) => Ok(Some(n)),
        Some(B::F(f)) if f >= 1.0 && f.is_finite() => Ok(Some(f.round() as u64)),
        Some(B::F(f)) => Err(serde::de::Error::custom(format!(
            "bytes {f}: must be at least 1"
        ))),
        Some(B::S(s)) => parse_bytes(&s).map(Some).map_err(serde::de::Error::custom),
    }
}

/// One entry of a demand file: a transfer (`src`, `dst`) or a collective
/// (`collective` plus `gpus` or `servers`). See the README for the schema.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemandEntry {
    /// Unique id.
    pub id: String,
    /// Tenant; "default" if absent.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Priority (higher first), default 0.
    #[serde(default)]
    pub priority: u8,
    /// May be deferred.
    #[serde(default)]
    pub elastic: bool,
    /// Deadline, ns.
    #[serde(default)]
    pub deadline_ns: Option<u64>,
    /// Start offset, ns.
    #[serde(default)]
    pub start_ns: u64,
    /// Bytes (integer or "4GiB"). Transfers: total; collectives: see the kind.
    #[serde(default, deserialize_with = "de_bytes")]
    pub bytes: Option<u64>,
    /// Rate per flow, Gbit/s.
    #[serde(default)]
    pub rate_gbps: Option<f64>,
    /// Duration, ns (transfers only).
    #[serde(default)]
    pub duration_ns: Option<u64>,
    /// Transfer source host.
    #[serde(default)]
    pub src: Option<String>,
    /// Transfer destination host.
    #[serde(default)]
    pub dst: Option<String>,
    /// Transfer: QPs to spread over (default 1).
    #[serde(default)]
    pub qps: Option<u32>,
    /// Collective kind.
    #[serde(default)]
    pub collective: Option<CollectiveKind>,
    /// Collective: the first N GPUs (whole servers, in topology order).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Collective: these servers.
    #[serde(default)]
    pub servers: Option<Vec<String>>,
    /// Collective: channels (QPs per rank pair), default = GPUs per server.
    #[serde(default)]
    pub channels: Option<u32>,
    /// Collective: one flow per step instead of one per connection.
    #[serde(default)]
    pub per_step: bool,
    /// Pipeline: stages.
    #[serde(default)]
    pub stages: Option<u32>,
    /// Pipeline: micro-batches.
    #[serde(default)]
    pub microbatches: Option<u32>,
    /// KV transfer: how many of the servers are prefill servers (default half).
    #[serde(default)]
    pub prefill_servers: Option<u32>,
}

/// A demand file: `demands: [ ... ]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemandFile {
    /// Entries.
    pub demands: Vec<DemandEntry>,
}

/// Turns a point-to-point signal into a demand. `line_rate_fraction` sets
/// the rate when the signal gives neither rate nor duration.
pub fn from_signal(
    topo: &Topology,
    s: &DemandSignal,
    qps: &mut QpAllocator,
    line_rate_fraction: f64,
) -> Result<Demand, DemandIssue> {
    let entry = DemandEntry {
        id: s.id.clone(),
        tenant: Some(s.tenant.clone()),
        priority: s.priority,
        elastic: s.elastic,
        deadline_ns: s.deadline_ns,
        start_ns: s.start_ns,
        bytes: Some(s.bytes),
        rate_gbps: s.rate_gbps,
        duration_ns: s.duration_ns,
        src: Some(s.src.clone()),
        dst: Some(s.dst.clone()),
        qps: Some(s.qps.max(1)),
        ..Default::default()
    };
    resolve_entry(
        topo,
        &entry,
        format!("demand '{}'", s.id),
        qps,
        line_rate_fraction,
    )
}

fn resolve_entry(
    topo: &Topology,
    d: &DemandEntry,
    loc: String,
    qps: &mut QpAllocator,
    line_rate_fraction: f64,
) -> Result<Demand, DemandIssue> {
    let bad = |m: String| DemandIssue {
        location: loc.clone(),
        message: m,
    };
    if d.id.trim().is_empty() {
        return Err(bad("id must not be empty".into()));
    }
    let bytes = d.bytes.ok_or_else(|| bad("bytes is required".into()))?;
    if bytes == 0 {
        return Err(bad("bytes must be at least 1".into()));
    }
    let rate_bps = match d.rate_gbps {
        Some(g) if !(g.is_finite() && g > 0.0) => {
            return Err(bad(format!("rate_gbps {g}: must be positive")))
        }
        Some(g) => Some(gbps_to_bps(g)),
        None => None,
    };
    if let Some(dl) = d.deadline_ns {
        if dl <= d.start_ns {
            return Err(bad(format!(
                "deadline_ns {dl} is not after start_ns {}",
                d.start_ns
            )));
        }
    }
    let (kind, flows) = match (&d.collective, &d.src, &d.dst) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(bad(
                "give either src/dst (a transfer) or collective, not both".into(),
            ))
        }
        (None, Some(src), Some(dst)) => (
            DemandKind::Transfer,
            transfer_flows(topo, d, src, dst, bytes, rate_bps, qps, line_rate_fraction)
                .map_err(bad)?,
        ),
        (None, _, _) => {
            return Err(bad("give src and dst (a transfer) or collective".into()));
        }
        (Some(ck), None, None) => (
            DemandKind::Collective(*ck),
            collective_flows(topo, d, *ck, bytes, rate_bps, qps, line_rate_fraction)
                .map_err(bad)?,
        ),
    };
    Ok(Demand {
        id: d.id.clone(),
        tenant: d.tenant.clone().unwrap_or_else(|| "default".into()),
        priority: d.priority,
        elastic: d.elastic,
        deadline_ns: d.deadline_ns,
        kind,
        flows,
    })
}

/// A transfer entry's flows: `qps` flows splitting its bytes and rate.
#[allow(clippy::too_many_arguments)]
fn transfer_flows(
    topo: &Topology,
    d: &DemandEntry,
    src: &str,
    dst: &str,
    bytes: u64,
    rate_bps: Option<u64>,
    qps: &mut QpAllocator,
    line_rate_fraction: f64,
) -> Result<Vec<Flow>, String> {
    for (f, v) in [
        ("gpus", d.gpus.is_some()),
        ("servers", d.servers.is_some()),
        ("channels", d.channels.is_some()),
        ("stages", d.stages.is_some()),
    ] {
        if v {
            return Err(format!("'{f}' applies to collectives, not to a transfer"));
        }
    }
    let s = topo
        .host_by_name(src)
        .ok_or_else(|| format!("src '{src}' is not a host of fabric '{}'", topo.name()))?;
    let t = topo
        .host_by_name(dst)
        .ok_or_else(|| format!("dst '{dst}' is not a host of fabric '{}'", topo.name()))?;
    if s == t {
        return Err(format!("src and dst are both '{src}'"));
    }
    let n = d.qps.unwrap_or(1);
    if n == 0 || n as u64 > bytes {
        return Err(format!("qps {n}: must be 1..=bytes"));
    }
    let hosts = topo.hosts();
    let nic = hosts[s as usize]
        .capacity_bps
        .min(hosts[t as usize].capacity_bps);
    let total_rate = match (rate_bps, d.duration_ns) {
        (Some(_), Some(_)) => return Err("give rate_gbps or duration_ns, not both".into()),
        (Some(r), None) => r,
        (None, Some(0)) => return Err("duration_ns must be positive".into()),
        (None, Some(dur)) => crate::conventions::rate_for(bytes, dur),
        (None, None) => ((nic as f64) * line_rate_fraction) as u64,
    };
    if total_rate == 0 {
        return Err("rate works out to 0 bit/s".into());
    }
    let per_bytes = bytes.div_ceil(n as u64);
    let per_rate = total_rate.div_ceil(n as u64);
    Ok((0..n)
        .map(|_| {
            let qp = qps.alloc(t);
            Flow::new(topo, s, t, qp, d.start_ns, per_bytes, per_rate)
        })
        .collect())
}

/// A collective entry's flows: its servers resolved, then expanded.
fn collective_flows(
    topo: &Topology,
    d: &DemandEntry,
    ck: CollectiveKind,
    bytes: u64,
    rate_bps: Option<u64>,
    qps: &mut QpAllocator,
    line_rate_fraction: f64,
) -> Result<Vec<Flow>, String> {
    if d.qps.is_some() || d.duration_ns.is_some() {
        return Err("'qps' and 'duration_ns' apply to transfers; collectives take 'channels' and 'rate_gbps'".into());
    }
    let servers = match (&d.gpus, &d.servers) {
        (Some(_), Some(_)) => return Err("give gpus or servers, not both".into()),
        (Some(g), None) => collectives::select_servers(topo, *g).map_err(|e| e.to_string())?,
        (None, Some(names)) => {
            let mut seen = HashSet::new();
            let mut v = Vec::new();
            for n in names {
                let ix = topo
                    .servers()
                    .iter()
                    .position(|s| &s.name == n)
                    .ok_or_else(|| format!("server '{n}' is not in fabric '{}'", topo.name()))?;
                if !seen.insert(ix) {
                    return Err(format!("server '{n}' is listed twice"));
                }
                v.push(ix as u32);
            }
            v
        }
        (None, None) => return Err("a collective needs gpus or servers".into()),
    };
    let mut c = Collective::new(ck, servers, bytes);
    c.start_ns = d.start_ns;
    c.rate_bps = rate_bps;
    c.line_rate_fraction = line_rate_fraction;
    c.per_step = d.per_step;
    if let Some(ch) = d.channels {
        c.channels = ch;
    } else {
        c.channels = topo.servers()[c.servers[0] as usize].gpus;
    }
    if let Some(s) = d.stages {
        c.stages = s;
    }
    if let Some(m) = d.microbatches {
        c.microbatches = m;
    }
    c.prefill_servers = d.prefill_servers;
    collectives::expand(topo, &c, qps).map_err(|e| e.to_string())
}

/// Resolves a parsed demand file against a topology. Every bad entry is
/// reported, with its index and id.
pub fn resolve(
    topo: &Topology,
    file: &DemandFile,
    line_rate_fraction: f64,
) -> Result<Vec<Demand>, DemandError> {
    let mut qps = QpAllocator::new(topo);
    let mut out = Vec::new();
    let mut issues = Vec::new();
    let mut ids = HashSet::new();
    for (i, d) in file.demands.iter().enumerate() {
        let loc = format!("demands[{i}] '{}'", d.id);
        if !ids.insert(d.id.as_str()) {
            issues.push(DemandIssue {
                location: loc,
                message: format!("id '{}' is used by an earlier demand", d.id),
            });
            continue;
        }
        match resolve_entry(topo, d, loc, &mut qps, line_rate_fraction) {
            Ok(x) => out.push(x),
            Err(e) => issues.push(e),
        }
    }
    if issues.is_empty() {
        Ok(out)
    } else {
        Err(DemandError::Invalid(issues))
    }
}

/// Parses and resolves a demand file's text.
pub fn load_str(
    topo: &Topology,
    text: &str,
    line_rate_fraction: f64,
) -> Result<Vec<Demand>, DemandError> {
    let file: DemandFile =
        serde_yaml::from_str(text).map_err(|e| DemandError::Parse(format!("demand YAML: {e}")))?;
    resolve(topo, &file, line_rate_fraction)
}

/// Reads, parses and resolves a demand file.
pub fn load_file(
    topo: &Topology,
    path: impl AsRef<std::path::Path>,
    line_rate_fraction: f64,
) -> Result<Vec<Demand>, DemandError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|io| DemandError::Io {
        path: path.display().to_string(),
        io,
    })?;
    let file: DemandFile = serde_yaml::from_str(&text)
        .map_err(|e| DemandError::Parse(format!("{}: {e}", path.display())))?;
    resolve(topo, &file, line_rate_fraction)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::{leaf_spine, LeafSpine};

    fn topo() -> Topology {
        Topology::from_spec(leaf_spine(&LeafSpine::default()).unwrap()).unwrap()
    }

    #[test]
    fn bytes_units() {
        assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("1.5 GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("3 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_bytes("0").is_err());
    }

    #[test]
    fn transfer_from_file() {
        let t = topo();
        let yaml = "demands:\n  - {id: a, src: h1, dst: h3, bytes: 1GB, rate_gbps: 40, qps: 2, priority: 3}\n";
        let d = load_str(&t, yaml, 0.9).unwrap();
        assert_eq!(d.len(), 1);
        let f = &d[0].flows;
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].bytes, 500_000_000);
        assert_eq!(f[0].rate_bps, 20_000_000_000);
        assert_eq!(f[0].duration_ns, 200_000_000);
        assert_ne!(f[0].dest_qp, f[1].dest_qp);
        assert_eq!(f[0].dst_ip.to_string(), "10.0.2.1");
    }

    #[test]
    fn errors_name_the_entry_and_field() {
        let t = topo();
        let yaml = "demands:\n  - {id: ok, src: h1, dst: h3, bytes: 100}\n  - {id: bad, src: h1, dst: nosuch, bytes: 100}\n  - {id: ok, src: h1, dst: h2, bytes: 100}\n  - {id: both, src: h1, dst: h2, bytes: 1, rate_gbps: 1, duration_ns: 5}\n";
        let e = load_str(&t, yaml, 0.9).unwrap_err().to_string();
        assert!(
            e.contains("demands[1] 'bad': dst 'nosuch' is not a host"),
            "{e}"
        );
        assert!(
            e.contains("demands[2] 'ok': id 'ok' is used by an earlier demand"),
            "{e}"
        );
        assert!(
            e.contains("demands[3] 'both': give rate_gbps or duration_ns, not both"),
            "{e}"
        );
        let e = load_str(
            &t,
            "demands:\n  - {id: x, src: h1, dst: h3, byts: 5}\n",
            0.9,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown field `byts`"), "{e}");
    }

    #[test]
    fn signal_default_rate_is_line_rate_fraction() {
        let t = topo();
        let mut q = QpAllocator::new(&t);
        let s = DemandSignal {
            id: "s".into(),
            tenant: "t".into(),
            src: "h1".into(),
            dst: "h4".into(),
            start_ns: 5,
            bytes: 1000,
            duration_ns: None,
            rate_gbps: None,
            priority: 1,
            elastic: false,
            deadline_ns: None,
            qps: 1,
        };
        let d = from_signal(&t, &s, &mut q, 0.5).unwrap();
        assert_eq!(d.flows[0].rate_bps, 50_000_000_000);
        assert_eq!(d.flows[0].start_ns, 5);
    }
}
