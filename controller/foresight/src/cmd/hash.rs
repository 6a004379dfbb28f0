//! `foresight hash check`: holds a description of the switches' hash
//! (`--switch-hash`) against what the switches were seen to do, before
//! entropy steering relies on it. Vendors publish which hash families and
//! knobs a switch has, not the exact bytes it feeds its CRC; probes are
//! how an operator learns whether a description is right.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use planner::hash_profile::FabricHash;
use planner::topology::{yaml, NodeRef, Topology};

#[derive(Args)]
pub struct HashCmd {
    #[command(subcommand)]
    action: HashAction,
}

#[derive(Subcommand)]
enum HashAction {
    /// Compare a hash description with observed ECMP choices: one CSV row
    /// per probe packet seen leaving a switch, with the header
    /// `switch,src_ip,dst_ip,udp_src_port,dst_qp,ingress_port,egress_port`.
    /// Exits non-zero when any row disagrees.
    Check {
        /// Topology YAML file.
        #[arg(long)]
        topology: PathBuf,
        /// The description (docs/entropy-steering.md).
        #[arg(long, value_name = "FILE")]
        switch_hash: PathBuf,
        /// Observations, CSV.
        observed: PathBuf,
    },
}

pub fn run(cmd: HashCmd) -> anyhow::Result<()> {
    match cmd.action {
        HashAction::Check {
            topology,
            switch_hash,
            observed,
        } => {
            let topo = yaml::load_file(&topology)?;
            let text = std::fs::read_to_string(&switch_hash)
                .with_context(|| format!("--switch-hash {}", switch_hash.display()))?;
            let fabric = FabricHash::from_yaml(&topo, &text, &switch_hash.display().to_string())
                .map_err(|e| anyhow::anyhow!("--switch-hash {e}"))?;
            let csv = std::fs::read_to_string(&observed)
                .with_context(|| format!("observations {}", observed.display()))?;
            let name = observed.display().to_string();
            let rows = parse(&csv, &name)?;
            let report = check(&topo, &fabric, &rows);
            print!("{}", report.text());
            if report.disagree > 0 {
                bail!(
                    "{} of {} observations disagree with {}",
                    report.disagree,
                    rows.len(),
                    switch_hash.display()
                );
            }
            Ok(())
        }
    }
}

/// One probe seen leaving a switch.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    line: usize,
    switch: String,
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    udp_src_port: u16,
    dst_qp: u32,
    ingress_port: u16,
    egress_port: u16,
}

const HEADER: &str = "switch,src_ip,dst_ip,udp_src_port,dst_qp,ingress_port,egress_port";

fn parse(text: &str, name: &str) -> anyhow::Result<Vec<Observed>> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, h)) if h.trim() == HEADER => {}
        Some((_, h)) => bail!("{name}: line 1 is '{h}': want the header {HEADER}"),
        None => bail!("{name}: empty (want the header {HEADER} and one row per probe)"),
    }
    let mut rows = Vec::new();
    for (i, l) in lines {
        let line = i + 1;
        let cols: Vec<&str> = l.split(',').map(str::trim).collect();
        if cols.len() != 7 {
            bail!(
                "{name}: line {line}: {} columns, want 7 ({HEADER})",
                cols.len()
            );
        }
        let bad = |what: &str, v: &str| anyhow::anyhow!("{name}: line {line}: {what} '{v}'");
        let num = |what: &str, v: &str, max: u32| -> anyhow::Result<u32> {
            v.parse::<u32>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| bad(&format!("{what} (0-{max})"), v))
        };
        rows.push(Observed {
            line,
            switch: cols[0].to_string(),
            src_ip: cols[1].parse().map_err(|_| bad("src_ip", cols[1]))?,
            dst_ip: cols[2].parse().map_err(|_| bad("dst_ip", cols[2]))?,
            udp_src_port: num("udp_src_port", cols[3], 65535)? as u16,
            dst_qp: num("dst_qp", cols[4], 0xFF_FFFF)?,
            ingress_port: num("ingress_port", cols[5], 65535)? as u16,
            egress_port: num("egress_port", cols[6], 65535)? as u16,
        });
    }
    Ok(rows)
}

/// How the description fared, per switch.
#[derive(Debug, Default)]
struct Report {
    /// (switch, observations, agreeing) in first-seen order.
    per_switch: Vec<(String, usize, usize)>,
    /// The first disagreements, as sentences.
    examples: Vec<String>,
    disagree: usize,
}

impl Report {
    fn text(&self) -> String {
        let mut out = String::from("switch       probes  agree\n");
        for (s, n, ok) in &self.per_switch {
            out += &format!("{s:<12} {n:>6} {ok:>6}\n");
        }
        for e in &self.examples {
            out += &format!("  {e}\n");
        }
        out
    }
}

fn check(topo: &Topology, fabric: &FabricHash, rows: &[Observed]) -> Report {
    let mut report = Report::default();
    for o in rows {
        let verdict = predict(topo, fabric, o);
        let i = match report.per_switch.iter().position(|(s, ..)| *s == o.switch) {
            Some(i) => i,
            None => {
                report.per_switch.push((o.switch.clone(), 0, 0));
                report.per_switch.len() - 1
            }
        };
        report.per_switch[i].1 += 1;
        match verdict {
            Ok(port) if port == o.egress_port => report.per_switch[i].2 += 1,
            other => {
                report.disagree += 1;
                if report.examples.len() < 10 {
                    report.examples.push(match other {
                        Ok(port) => format!(
                            "line {}: {} sent port {} out of port {}, the description says {port}",
                            o.line, o.switch, o.udp_src_port, o.egress_port
                        ),
                        Err(why) => format!("line {}: {why}", o.line),
                    });
                }
            }
        }
    }
    report
}

/// The egress port the description gives the probe at its switch.
fn predict(topo: &Topology, fabric: &FabricHash, o: &Observed) -> Result<u16, String> {
    let s = topo
        .switch_by_name(&o.switch)
        .ok_or_else(|| format!("'{}' is not a switch of the topology", o.switch))?;
    let dst = topo
        .hosts()
        .iter()
        .position(|h| h.ip == o.dst_ip)
        .ok_or_else(|| format!("{} is no host of the topology", o.dst_ip))?;
    let src = topo
        .hosts()
        .iter()
        .position(|h| h.ip == o.src_ip)
        .ok_or_else(|| format!("{} is no host of the topology", o.src_ip))?;
    let leaf = topo.hosts()[dst].leaf;
    if s == leaf {
        return Err(format!(
            "{} is the destination's leaf: it does not hash",
            o.switch
        ));
    }
    let group: Vec<_> = planner::ecmp::viable_next_hops(topo, s, leaf, |_| false).collect();
    if group.is_empty() {
        return Err(format!("{} has no route toward {}", o.switch, o.dst_ip));
    }
    let mut flow = planner::Flow::new(topo, src as u32, dst as u32, o.dst_qp, 0, 1, 1);
    flow.udp_src_port = o.udp_src_port;
    let e = group[fabric.switches[s as usize].member(&flow, o.ingress_port, group.len())];
    let link = topo.edge(e);
    debug_assert_eq!(link.from, NodeRef::Switch(s));
    Ok(link.from_port)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab() -> Topology {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bmv2-lab/topologies/pod3-lab.yaml"
        );
        yaml::load_file(std::path::Path::new(path)).unwrap()
    }

    const ASIC: &str = "version: 1\ndefault: {function: crc16-ccitt-false, seed: 11, \
                        fields: [src_ip, dst_ip, ip_proto, l4_src_port, l4_dst_port, ingress_port]}\n";

    /// Observations the description itself predicts all agree; the same
    /// observations against another CRC mostly do not, and the report
    /// names the lines. (Another seed would not do: a seed XORs one
    /// constant into every hash, so it flips every choice of a two-member
    /// group or none.)
    #[test]
    fn a_right_description_agrees_and_a_wrong_one_is_caught() {
        let topo = lab();
        let right = FabricHash::from_yaml(&topo, ASIC, "asic.yaml").unwrap();
        let h8 = topo.host_by_name("h8").unwrap() as usize;
        let (src, dst) = (&topo.hosts()[0], &topo.hosts()[h8]);
        let leaf = &topo.switches()[src.leaf as usize].name;
        let mut csv = format!("{HEADER}\n");
        for port in 49152..49252u16 {
            let o = Observed {
                line: 0,
                switch: leaf.clone(),
                src_ip: src.ip,
                dst_ip: dst.ip,
                udp_src_port: port,
                dst_qp: 7,
                ingress_port: 1,
                egress_port: 0,
            };
            let out = predict(&topo, &right, &o).unwrap();
            csv += &format!("{leaf},{},{},{port},7,1,{out}\n", src.ip, dst.ip);
        }
        let rows = parse(&csv, "seen.csv").unwrap();
        let good = check(&topo, &right, &rows);
        assert_eq!((good.disagree, good.per_switch[0].2), (0, 100));
        let wrong = FabricHash::from_yaml(&topo, &ASIC.replace("ccitt-false", "arc"), "x").unwrap();
        let bad = check(&topo, &wrong, &rows);
        assert!(bad.disagree > 20, "{}", bad.text());
        assert!(bad.examples[0].starts_with("line "), "{}", bad.text());
    }

    #[test]
    fn bad_observations_name_the_line() {
        for (csv, why) in [
            ("", "empty"),
            ("switch,src\n", "want the header"),
            (
                &format!("{HEADER}\nleaf1,10.0.1.1,10.0.2.1,70000,1,1,2\n"),
                "line 2: udp_src_port (0-65535) '70000'",
            ),
            (
                &format!("{HEADER}\nleaf1,10.0.1.x,10.0.2.1,1,1,1,2\n"),
                "line 2: src_ip",
            ),
            (&format!("{HEADER}\nleaf1,10.0.1.1\n"), "line 2: 2 columns"),
        ] {
            let e = parse(csv, "seen.csv").unwrap_err().to_string();
            assert!(e.contains(why) && e.starts_with("seen.csv"), "{why}: {e}");
        }
    }
}
