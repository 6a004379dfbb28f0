//! Experiment spec (JSON) shared by all host processes, and its validation.
//!
//! Validation errors name the JSON path of the offending field so the
//! experiment runner can point at the generated spec directly.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::dcqcn::DcqcnParams;
use crate::packet::{BTH_LEN, ICRC_LEN, IPV4_LEN, UDP_LEN};

/// Largest payload that fits a 1500-byte MTU with IPv4/UDP/BTH/ICRC.
pub const MAX_PAYLOAD: u32 = 1500 - (IPV4_LEN + UDP_LEN + BTH_LEN + ICRC_LEN) as u32;
/// QPNs 0 and 1 are special in InfiniBand; QPNs are 24-bit.
pub const QP_MIN: u32 = 2;
pub const QP_MAX: u32 = 0xFF_FFFF;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub start_unix_ns: u64,
    pub payload_bytes: u32,
    #[serde(default)]
    pub dcqcn: DcqcnParams,
    pub hosts: BTreeMap<String, String>,
    pub flows: Vec<Flow>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Collective,
    Background,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Collective => "collective",
            Kind::Background => "background",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub id: String,
    pub kind: Kind,
    pub src: String,
    pub dst: String,
    pub src_qp: u32,
    pub dest_qp: u32,
    pub udp_src_port: u16,
    pub bytes: u64,
    pub line_rate_pps: f64,
    pub dscp: u8,
    #[serde(default)]
    pub start_offset_ns: u64,
    /// Background traffic that runs until a moment rather than for a size:
    /// the sender stops at start + this and the flow counts as done with
    /// what was delivered. Only for a flow alone on its QP pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_offset_ns: Option<u64>,
    #[serde(default)]
    pub after: Vec<String>,
}

impl Flow {
    pub fn packets(&self, payload: u32) -> u64 {
        self.bytes.div_ceil(u64::from(payload))
    }
}

impl Spec {
    pub fn load(path: &std::path::Path) -> Result<Spec> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let spec: Spec = serde_json::from_str(&text)
            .with_context(|| format!("parsing spec {}", path.display()))?;
        spec.validate()
            .with_context(|| format!("invalid spec {}", path.display()))?;
        Ok(spec)
    }

    /// Reads a spec without validating it, for readers that check what
    /// they use (the simulator's lab scenarios); errors name `what`.
    pub fn parse(text: &str, what: &str) -> Result<Spec> {
        serde_json::from_str(text).with_context(|| format!("{what}: not a rocegen spec"))
    }

    pub fn ip(&self, host: &str) -> Option<Ipv4Addr> {
        self.hosts.get(host).and_then(|s| s.parse().ok())
    }

    /// Flow indices grouped by connection (src, src_qp), in spec order:
    /// flows of one connection are messages sent one after the other.
    pub fn connections(&self) -> BTreeMap<(String, u32), Vec<usize>> {
        let mut m: BTreeMap<(String, u32), Vec<usize>> = BTreeMap::new();
        for (i, f) in self.flows.iter().enumerate() {
            m.entry((f.src.clone(), f.src_qp)).or_default().push(i);
        }
        m
    }

    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_PAYLOAD).contains(&self.payload_bytes) {
            bail!(
                "payload_bytes: {} must be in 1..={MAX_PAYLOAD} (1500-byte MTU)",
                self.payload_bytes
            );
        }
        self.dcqcn.validate("dcqcn").map_err(anyhow::Error::msg)?;
        if self.hosts.is_empty() {
            bail!("hosts: must name at least one host");
        }
        let mut ips: HashMap<Ipv4Addr, &str> = HashMap::new();
        for (name, ip) in &self.hosts {
            let a: Ipv4Addr = ip
                .parse()
                .map_err(|_| anyhow::anyhow!("hosts.{name}: \"{ip}\" is not an IPv4 address"))?;
            if let Some(other) = ips.insert(a, name) {
                bail!("hosts.{name}: address {a} already used by {other}");
            }
        }
        let mut ids: HashMap<&str, usize> = HashMap::new();
        for (i, f) in self.flows.iter().enumerate() {
            let p = format!("flows[{i}]");
            if f.id.is_empty() || f.id.contains(',') || f.id.chars().any(char::is_whitespace) {
                bail!(
                    "{p}.id: \"{}\" must be non-empty without commas or spaces",
                    f.id
                );
            }
            if let Some(j) = ids.insert(&f.id, i) {
                bail!("{p}.id: \"{}\" duplicates flows[{j}]", f.id);
            }
            for (field, h) in [("src", &f.src), ("dst", &f.dst)] {
                if !self.hosts.contains_key(h) {
                    bail!("{p}.{field}: unknown host \"{h}\"");
                }
            }
            if f.src == f.dst {
                bail!("{p}.dst: same as src \"{}\"", f.src);
            }
            if let Some(stop) = f.stop_offset_ns {
                if stop <= f.start_offset_ns {
                    bail!(
                        "{p}.stop_offset_ns: {stop} must be after start_offset_ns {}",
                        f.start_offset_ns
                    );
                }
                let shared = self.flows.iter().enumerate().any(|(j, g)| {
                    j != i && g.src == f.src && g.dst == f.dst && g.src_qp == f.src_qp
                });
                if shared {
                    bail!("{p}.stop_offset_ns: only for a flow alone on its QP pair");
                }
            }
            for (field, q) in [("src_qp", f.src_qp), ("dest_qp", f.dest_qp)] {
                if !(QP_MIN..=QP_MAX).contains(&q) {
                    bail!("{p}.{field}: {q:#x} must be in {QP_MIN:#x}..={QP_MAX:#x}");
                }
            }
            if f.udp_src_port == 0 {
                bail!("{p}.udp_src_port: must be non-zero");
            }
            if f.bytes == 0 {
                bail!("{p}.bytes: must be > 0");
            }
            if !(f.line_rate_pps.is_finite() && f.line_rate_pps >= 1.0 && f.line_rate_pps <= 1e6) {
                bail!("{p}.line_rate_pps: {} must be in 1..=1e6", f.line_rate_pps);
            }
            if f.dscp > 63 {
                bail!("{p}.dscp: {} must be < 64", f.dscp);
            }
        }
        for (i, f) in self.flows.iter().enumerate() {
            for (k, dep) in f.after.iter().enumerate() {
                let p = format!("flows[{i}].after[{k}]");
                let Some(&j) = ids.get(dep.as_str()) else {
                    bail!("{p}: unknown flow \"{dep}\"");
                };
                let d = &self.flows[j];
                if d.dst != f.src {
                    bail!(
                        "{p}: flow \"{dep}\" ends at {}, not at this flow's source {}",
                        d.dst,
                        f.src
                    );
                }
            }
        }
        self.validate_qps()?;
        self.check_cycles()
    }

    /// A QP number names one endpoint per host; a connection is one QP pair,
    /// and its messages share the QP's rate limiter and UDP port.
    fn validate_qps(&self) -> Result<()> {
        // (host, qp) -> (flow index, role, peer host, peer qp)
        let mut ends: HashMap<(&str, u32), (usize, &str, &str, u32)> = HashMap::new();
        for (i, f) in self.flows.iter().enumerate() {
            for (host, qp, role, field, peer, peer_qp) in [
                (&f.src, f.src_qp, "send", "src_qp", &f.dst, f.dest_qp),
                (&f.dst, f.dest_qp, "recv", "dest_qp", &f.src, f.src_qp),
            ] {
                match ends.get(&(host.as_str(), qp)) {
                    None => {
                        ends.insert((host, qp), (i, role, peer, peer_qp));
                    }
                    Some(&(j, r, ph, pq)) => {
                        if r != role || ph != peer.as_str() || pq != peer_qp {
                            bail!(
                                "flows[{i}].{field}: QP {qp:#x} on {host} is already the {r} end \
                                 of flows[{j}] ({ph} QP {pq:#x}); one QP pair per connection"
                            );
                        }
                        let g = &self.flows[j];
                        if role == "send"
                            && (g.udp_src_port != f.udp_src_port
                                || g.dscp != f.dscp
                                || g.line_rate_pps != f.line_rate_pps)
                        {
                            bail!(
                                "flows[{i}]: shares QP {qp:#x} on {host} with flows[{j}] but \
                                 differs in udp_src_port, dscp or line_rate_pps"
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Dependencies plus the implicit order of messages on a connection
    /// must form a DAG, or some host would wait forever.
    fn check_cycles(&self) -> Result<()> {
        let n = self.flows.len();
        let idx: HashMap<&str, usize> = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| (f.id.as_str(), i))
            .collect();
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, f) in self.flows.iter().enumerate() {
            preds[i].extend(f.after.iter().map(|d| idx[d.as_str()]));
        }
        for msgs in self.connections().values() {
            for w in msgs.windows(2) {
                preds[w[1]].push(w[0]);
            }
        }
        // 0 = new, 1 = on stack, 2 = done
        let mut state = vec![0u8; n];
        for root in 0..n {
            if state[root] != 0 {
                continue;
            }
            let mut stack = vec![(root, 0usize)];
            state[root] = 1;
            while let Some(&mut (v, ref mut k)) = stack.last_mut() {
                if let Some(&u) = preds[v].get(*k) {
                    *k += 1;
                    match state[u] {
                        0 => {
                            state[u] = 1;
                            stack.push((u, 0));
                        }
                        1 => {
                            let pos = stack.iter().position(|&(x, _)| x == u).unwrap_or(0);
                            let cycle: Vec<&str> = stack[pos..]
                                .iter()
                                .map(|&(x, _)| self.flows[x].id.as_str())
                                .collect();
                            bail!(
                                "flows[{v}].after: dependency cycle (counting message order on \
                                 a connection): {} <- {}",
                                cycle.join(" <- "),
                                self.flows[u].id
                            );
                        }
                        _ => {}
                    }
                } else {
                    state[v] = 2;
                    stack.pop();
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(id: &str, src: &str, dst: &str, sqp: u32, dqp: u32) -> Flow {
        Flow {
            id: id.into(),
            kind: Kind::Collective,
            src: src.into(),
            dst: dst.into(),
            src_qp: sqp,
            dest_qp: dqp,
            udp_src_port: 49152 + (dqp % 16384) as u16,
            bytes: 4096,
            line_rate_pps: 400.0,
            dscp: 24,
            start_offset_ns: 0,
            stop_offset_ns: None,
            after: vec![],
        }
    }

    fn spec() -> Spec {
        let mut hosts = BTreeMap::new();
        for i in 1..=3 {
            hosts.insert(format!("h{i}"), format!("10.0.1.{i}"));
        }
        Spec {
            start_unix_ns: 1,
            payload_bytes: 1024,
            dcqcn: DcqcnParams::default(),
            hosts,
            flows: vec![
                flow("a", "h1", "h2", 0x1001, 0x100),
                flow("b", "h2", "h3", 0x1002, 0x200),
                flow("c", "h3", "h1", 0x1003, 0x300),
            ],
        }
    }

    fn err(s: &Spec) -> String {
        format!("{:#}", s.validate().unwrap_err())
    }

    #[test]
    fn valid_spec_passes_and_json_round_trips() {
        let mut s = spec();
        s.flows[1].after = vec!["a".into()];
        s.validate().unwrap();
        let text = serde_json::to_string(&s).unwrap();
        let back: Spec = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn stop_offset_must_follow_start_and_own_its_qp_pair() {
        let mut s = spec();
        s.flows[0].start_offset_ns = 5;
        s.flows[0].stop_offset_ns = Some(5);
        assert!(err(&s).contains("flows[0].stop_offset_ns: 5 must be after start_offset_ns 5"));
        s.flows[0].stop_offset_ns = Some(6);
        s.validate().unwrap();
        let mut second = flow("a2", "h1", "h2", 0x1001, 0x100);
        second.after = vec![];
        s.flows.push(second);
        assert!(err(&s).contains("only for a flow alone on its QP pair"));
    }

    #[test]
    fn unknown_fields_rejected() {
        let text = r#"{"start_unix_ns":1,"payload_bytes":1024,"hosts":{},"flows":[],"extra":1}"#;
        let e = serde_json::from_str::<Spec>(text).unwrap_err().to_string();
        assert!(e.contains("unknown field `extra`"), "{e}");
        let text = r#"{"start_unix_ns":1,"payload_bytes":1024,"hosts":{},"flows":[],
                       "dcqcn":{"gain":0.1}}"#;
        let e = serde_json::from_str::<Spec>(text).unwrap_err().to_string();
        assert!(e.contains("unknown field `gain`"), "{e}");
    }

    #[test]
    fn dependency_must_end_at_source() {
        let mut s = spec();
        s.flows[1].after = vec!["c".into()];
        assert_eq!(
            err(&s),
            "flows[1].after[0]: flow \"c\" ends at h1, not at this flow's source h2"
        );
        s.flows[1].after = vec!["a".into(), "zz".into()];
        assert_eq!(err(&s), "flows[1].after[1]: unknown flow \"zz\"");
    }

    #[test]
    fn cycles_detected() {
        let mut s = spec();
        s.flows[0].after = vec!["c".into()];
        s.flows[1].after = vec!["a".into()];
        s.flows[2].after = vec!["b".into()];
        let e = err(&s);
        assert!(e.contains("dependency cycle"), "{e}");
        assert!(e.contains('a') && e.contains('b') && e.contains('c'), "{e}");
    }

    #[test]
    fn cycle_through_connection_order_detected() {
        let mut s = spec();
        // x then a on the same connection h1->h2; x waits for b, b for a.
        let mut x = flow("x", "h1", "h2", 0x1001, 0x100);
        x.after = vec!["c".into()];
        s.flows.insert(0, x);
        s.flows[3].after = vec!["x".into()]; // c (h3->h1) after x? x ends at h2
        assert!(err(&s).starts_with("flows[3].after[0]: flow \"x\" ends at h2"));
        s.flows[3].after = vec!["b".into()];
        s.flows[2].after = vec!["a".into()];
        assert!(err(&s).contains("dependency cycle"), "{}", err(&s));
    }

    #[test]
    fn field_errors_name_paths() {
        let mut s = spec();
        s.flows[2].dst = "h9".into();
        assert_eq!(err(&s), "flows[2].dst: unknown host \"h9\"");
        let mut s = spec();
        s.flows[1].id = "a".into();
        assert_eq!(err(&s), "flows[1].id: \"a\" duplicates flows[0]");
        let mut s = spec();
        s.flows[0].dest_qp = 1 << 24;
        assert_eq!(
            err(&s),
            "flows[0].dest_qp: 0x1000000 must be in 0x2..=0xffffff"
        );
        let mut s = spec();
        s.flows[0].dscp = 64;
        assert_eq!(err(&s), "flows[0].dscp: 64 must be < 64");
        let mut s = spec();
        s.hosts.insert("h4".into(), "10.0.1".into());
        assert_eq!(err(&s), "hosts.h4: \"10.0.1\" is not an IPv4 address");
        let mut s = spec();
        s.payload_bytes = 2000;
        assert!(err(&s).starts_with("payload_bytes: 2000"));
        let mut s = spec();
        s.dcqcn.rmin_frac = 2.0;
        assert_eq!(err(&s), "dcqcn.rmin_frac: 2 must be in (0, 1]");
    }

    #[test]
    fn qp_reuse_rules() {
        let mut s = spec();
        // h2 uses 0x1002 as its sending QP; receiving on it too is a clash.
        s.flows[0].dest_qp = 0x1002;
        let e = err(&s);
        assert!(e.starts_with("flows[1].src_qp: QP 0x1002 on h2"), "{e}");
        // Second message on the same connection is fine...
        let mut s = spec();
        s.flows.push(flow("a2", "h1", "h2", 0x1001, 0x100));
        s.validate().unwrap();
        // ...but not with another rate.
        s.flows[3].line_rate_pps = 10.0;
        assert!(err(&s).contains("differs in udp_src_port, dscp or line_rate_pps"));
    }
}
