//! Validation of a [`TopologySpec`]: every problem is reported with the
//! element it is in (`switches[3] 'leaf4'`, `links[7] leaf1:3 <-> spine2:1`,
//! `hosts[0] 'h1'`) and what is wrong, all at once.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::Ipv4Addr;

use super::spec::{Role, TopologySpec};
use crate::conventions::{FIRST_PORT, LEAF_PREFIX_LEN};

/// One problem found in a topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// Which element: `hosts[2] 'h3'`, `links[0] leaf1:3 <-> spine1:1`, `fabric`.
    pub location: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in out.iter_mut() {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(out)
}

/// Formats a MAC as `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Parses `a.b.c.d/len` (the prefix length is required).
pub fn parse_ip_prefix(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (ip, len) = s
        .split_once('/')
        .ok_or_else(|| format!("ip '{s}' has no prefix length (write e.g. 10.0.1.1/24)"))?;
    let ip: Ipv4Addr = ip
        .parse()
        .map_err(|_| format!("ip '{s}': '{ip}' is not an IPv4 address"))?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("ip '{s}': prefix length '{len}' is not 0..=32"))?;
    Ok((ip, len))
}

fn network(ip: Ipv4Addr, len: u8) -> u32 {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask
}

fn check_gbps(gbps: f64) -> Option<String> {
    if !gbps.is_finite() || gbps <= 0.0 {
        Some(format!("capacity {gbps} Gbit/s must be a positive number"))
    } else if gbps > 100_000.0 {
        Some(format!(
            "capacity {gbps} Gbit/s is implausible (over 100 Tbit/s; the unit is Gbit/s)"
        ))
    } else {
        None
    }
}

/// Checks a spec; returns every problem found (empty = valid).
pub fn validate(spec: &TopologySpec) -> Vec<Issue> {
    let mut issues = Vec::new();
    let mut push = |location: String, message: String| issues.push(Issue { location, message });

    if spec.version != super::spec::SCHEMA_VERSION {
        push(
            "version".into(),
            format!(
                "schema version {} is not supported (this build reads version {})",
                spec.version,
                super::spec::SCHEMA_VERSION
            ),
        );
    }
    if spec.switches.is_empty() {
        push(
            "switches".into(),
            "a fabric needs at least one switch".into(),
        );
    }

    // Names, ids.
    let mut names: HashMap<&str, String> = HashMap::new();
    let mut ids: HashMap<u32, &str> = HashMap::new();
    let mut roles: HashMap<&str, (Role, Option<u32>)> = HashMap::new();
    for (i, s) in spec.switches.iter().enumerate() {
        let loc = format!("switches[{i}] '{}'", s.name);
        if s.name.trim().is_empty() || s.name.contains(char::is_whitespace) {
            push(loc.clone(), "name must be non-empty without spaces".into());
        }
        if let Some(prev) = names.insert(&s.name, loc.clone()) {
            push(
                loc.clone(),
                format!("name '{}' is already used by {prev}", s.name),
            );
        }
        if let Some(prev) = ids.insert(s.id, &s.name) {
            push(
                loc.clone(),
                format!("id {} is already used by switch '{prev}' (ids are P4Runtime device ids and must be unique)", s.id),
            );
        }
        if s.role == Role::Superspine && s.pod.is_some() {
            push(
                loc.clone(),
                "a superspine belongs to no pod; remove 'pod'".into(),
            );
        }
        roles.insert(&s.name, (s.role, s.pod));
    }
    for (i, h) in spec.hosts.iter().enumerate() {
        let loc = format!("hosts[{i}] '{}'", h.name);
        if h.name.trim().is_empty() || h.name.contains(char::is_whitespace) {
            push(loc.clone(), "name must be non-empty without spaces".into());
        }
        if let Some(prev) = names.insert(&h.name, loc.clone()) {
            push(
                loc.clone(),
                format!("name '{}' is already used by {prev}", h.name),
            );
        }
    }

    // Ports: (switch, port) -> who uses it.
    let mut ports: HashMap<(String, u16), String> = HashMap::new();
    let mut use_port = |sw: &str, port: u16, who: String, push: &mut dyn FnMut(String, String)| {
        if port < FIRST_PORT {
            push(
                who.clone(),
                format!("port {port} on '{sw}': ports are numbered from {FIRST_PORT}"),
            );
        }
        if let Some(prev) = ports.get(&(sw.to_string(), port)) {
            push(
                who.clone(),
                format!("port {port} on '{sw}' is already used by {prev}"),
            );
        } else {
            ports.insert((sw.to_string(), port), who);
        }
    };

    // Hosts.
    let mut ips: HashMap<Ipv4Addr, &str> = HashMap::new();
    let mut macs: HashMap<[u8; 6], &str> = HashMap::new();
    let mut leaf_subnet: HashMap<&str, (u32, u8, &str)> = HashMap::new();
    let mut subnet_leaf: HashMap<(u32, u8), &str> = HashMap::new();
    let mut rails_seen = false;
    let mut no_rail: Vec<String> = Vec::new();
    let mut server_rails: HashMap<&str, HashSet<u32>> = HashMap::new();
    for (i, h) in spec.hosts.iter().enumerate() {
        let loc = format!("hosts[{i}] '{}'", h.name);
        match parse_ip_prefix(&h.ip) {
            Err(e) => push(loc.clone(), e),
            Ok((ip, len)) => {
                if len != LEAF_PREFIX_LEN {
                    push(
                        loc.clone(),
                        format!("ip '{}': each leaf owns a /{LEAF_PREFIX_LEN}, so the prefix must be /{LEAF_PREFIX_LEN}", h.ip),
                    );
                }
                let host_mask = !network(Ipv4Addr::from(u32::MAX), len);
                let host_part = u32::from(ip) & host_mask;
                if len < 31 && (host_part == 0 || host_part == host_mask) {
                    push(
                        loc.clone(),
                        format!(
                            "ip '{}' is the network or broadcast address of its subnet",
                            h.ip
                        ),
                    );
                }
                if let Some(prev) = ips.insert(ip, &h.name) {
                    push(
                        loc.clone(),
                        format!("ip {ip} is already used by host '{prev}'"),
                    );
                }
                let net = network(ip, len);
                match leaf_subnet.get(h.leaf.as_str()) {
                    Some(&(n, l, first)) if (n, l) != (net, len) => push(
                        loc.clone(),
                        format!(
                            "ip '{}' is outside leaf '{}''s subnet {}/{} (set by host '{first}'); all hosts of a leaf share its subnet so IPv4 LPM can route",
                            h.ip, h.leaf, Ipv4Addr::from(n), l
                        ),
                    ),
                    Some(_) => {}
                    None => {
                        leaf_subnet.insert(&h.leaf, (net, len, &h.name));
                        if let Some(other) = subnet_leaf.insert((net, len), &h.leaf) {
                            if other != h.leaf {
                                push(
                                    loc.clone(),
                                    format!(
                                        "subnet {}/{len} of leaf '{}' is also used by leaf '{other}'; each leaf needs its own subnet",
                                        Ipv4Addr::from(net), h.leaf
                                    ),
                                );
                            }
                        }
                    }
                }
            }
        }
        match parse_mac(&h.mac) {
            None => push(
                loc.clone(),
                format!("mac '{}' is not of the form aa:bb:cc:dd:ee:ff", h.mac),
            ),
            Some(m) => {
                if m[0] & 1 == 1 {
                    push(
                        loc.clone(),
                        format!("mac '{}' is a multicast address", h.mac),
                    );
                }
                if let Some(prev) = macs.insert(m, &h.name) {
                    push(
                        loc.clone(),
                        format!("mac '{}' is already used by host '{prev}'", h.mac),
                    );
                }
            }
        }
        match roles.get(h.leaf.as_str()) {
            None => push(
                loc.clone(),
                format!("leaf '{}' is not a switch of this fabric", h.leaf),
            ),
            Some((role, _)) if *role != Role::Leaf => push(
                loc.clone(),
                format!(
                    "attaches to '{}', which is a {role}; hosts attach to leaves",
                    h.leaf
                ),
            ),
            Some(_) => use_port(&h.leaf, h.port, loc.clone(), &mut push),
        }
        if let Some(e) = check_gbps(h.gbps) {
            push(loc.clone(), e);
        }
        if h.gpus == 0 {
            push(loc.clone(), "gpus must be at least 1".into());
        }
        match h.rail {
            Some(r) => {
                rails_seen = true;
                if let Some(server) = &h.server {
                    if !server_rails.entry(server).or_default().insert(r) {
                        push(
                            loc.clone(),
                            format!("server '{server}' has two NICs on rail {r}"),
                        );
                    }
                }
            }
            None => no_rail.push(loc.clone()),
        }
    }
    if rails_seen {
        for loc in no_rail {
            push(
                loc,
                "other hosts have a rail; every host of a rail-optimized fabric needs one".into(),
            );
        }
    }

    // Links.
    let mut pairs: HashSet<(&str, &str)> = HashSet::new();
    for (i, l) in spec.links.iter().enumerate() {
        let loc = format!(
            "links[{i}] {}:{} <-> {}:{}",
            l.node1, l.port1, l.node2, l.port2
        );
        if let Some(e) = check_gbps(l.gbps) {
            push(loc.clone(), e);
        }
        if l.node1 == l.node2 {
            push(
                loc.clone(),
                "a link must join two different switches".into(),
            );
            continue;
        }
        let mut ends_ok = true;
        for n in [&l.node1, &l.node2] {
            if !roles.contains_key(n.as_str()) {
                ends_ok = false;
                if names.contains_key(n.as_str()) {
                    push(
                        loc.clone(),
                        format!("'{n}' is a host; hosts attach through their own entry (leaf, port), not through links"),
                    );
                } else {
                    push(loc.clone(), format!("'{n}' is not a switch of this fabric"));
                }
            }
        }
        use_port(&l.node1, l.port1, loc.clone(), &mut push);
        use_port(&l.node2, l.port2, loc.clone(), &mut push);
        if !ends_ok {
            continue;
        }
        let (r1, p1) = roles[l.node1.as_str()];
        let (r2, p2) = roles[l.node2.as_str()];
        let (lo, hi, plo, phi) = if r1 <= r2 {
            (r1, r2, p1, p2)
        } else {
            (r2, r1, p2, p1)
        };
        if hi.tier() != lo.tier() + 1 {
            push(
                loc.clone(),
                format!("joins a {r1} to a {r2}; links must join adjacent tiers (leaf-spine or spine-superspine)"),
            );
        } else if lo == Role::Leaf && plo.unwrap_or(0) != phi.unwrap_or(0) {
            push(
                loc.clone(),
                format!(
                    "joins a leaf of pod {} to a spine of pod {}; leaves connect to the spines of their own pod",
                    plo.unwrap_or(0),
                    phi.unwrap_or(0)
                ),
            );
        }
        let key = if l.node1 < l.node2 {
            (l.node1.as_str(), l.node2.as_str())
        } else {
            (l.node2.as_str(), l.node1.as_str())
        };
        pairs.insert(key);
    }

    // Every leaf with hosts needs a way up if there are other leaves.
    let leaves: Vec<&str> = spec
        .switches
        .iter()
        .filter(|s| s.role == Role::Leaf)
        .map(|s| s.name.as_str())
        .collect();
    if leaves.is_empty() && !spec.switches.is_empty() {
        push("switches".into(), "a fabric needs at least one leaf".into());
    }
    issues.extend(connectivity(spec, &roles));
    issues
}

/// Every pair of leaves must be connected through the switch graph.
fn connectivity(spec: &TopologySpec, roles: &HashMap<&str, (Role, Option<u32>)>) -> Vec<Issue> {
    let idx: HashMap<&str, usize> = spec
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    let mut adj = vec![Vec::new(); spec.switches.len()];
    for l in &spec.links {
        if let (Some(&a), Some(&b)) = (idx.get(l.node1.as_str()), idx.get(l.node2.as_str())) {
            adj[a].push(b);
            adj[b].push(a);
        }
    }
    let leaves: Vec<usize> = spec
        .switches
        .iter()
        .enumerate()
        .filter(|(_, s)| roles.get(s.name.as_str()).map(|r| r.0) == Some(Role::Leaf))
        .map(|(i, _)| i)
        .collect();
    let Some(&first) = leaves.first() else {
        return Vec::new();
    };
    let mut seen = vec![false; spec.switches.len()];
    let mut stack = vec![first];
    seen[first] = true;
    while let Some(n) = stack.pop() {
        for &m in &adj[n] {
            if !seen[m] {
                seen[m] = true;
                stack.push(m);
            }
        }
    }
    let mut out = Vec::new();
    for &l in &leaves {
        if !seen[l] {
            out.push(Issue {
                location: format!("switches[{l}] '{}'", spec.switches[l].name),
                message: format!(
                    "leaf cannot reach leaf '{}' through the links given",
                    spec.switches[first].name
                ),
            });
        }
    }
    for (i, s) in spec.switches.iter().enumerate() {
        if s.role != Role::Leaf && adj[i].is_empty() && spec.switches.len() > 1 {
            out.push(Issue {
                location: format!("switches[{i}] '{}'", s.name),
                message: format!("{} has no links", s.role),
            });
        }
    }
    out
}
