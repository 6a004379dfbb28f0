//! `foresight int-collect`: a standalone INT collector that writes every
//! hop of every telemetry report to CSV, for experiments that want the
//! queue depth over time rather than the controller's per-link summary.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use planner::topology::yaml;

use crate::daemon::inputs::telemetry::parse_report;
use crate::daemon::now_unix_ns;

#[derive(Args)]
pub struct IntCollectCmd {
    /// UDP address the sinks send reports to.
    #[arg(long, default_value = "0.0.0.0:32766")]
    listen: SocketAddr,
    /// CSV file to write (one row per hop of every report).
    #[arg(long)]
    csv: PathBuf,
    /// Fabric topology, to name switches by their INT node id.
    #[arg(long)]
    topology: Option<PathBuf>,
}

const HEADER: &str = "recv_unix_ns,sink,seq,src,dst,hop,node,ingress_port,egress_port,queue_id,queue_occupancy,hop_latency_us,egress_ts_us,tx_bytes,dst_qp";

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

pub fn run(cmd: IntCollectCmd) -> anyhow::Result<()> {
    let names: std::collections::HashMap<u32, String> = match &cmd.topology {
        Some(p) => yaml::load_file(p)
            .with_context(|| format!("topology {}", p.display()))?
            .switches()
            .iter()
            .map(|s| (s.id, s.name.clone()))
            .collect(),
        None => Default::default(),
    };
    let name = |id: u32| names.get(&id).cloned().unwrap_or_else(|| id.to_string());
    let file = std::fs::File::create(&cmd.csv)
        .with_context(|| format!("--csv {}: cannot create", cmd.csv.display()))?;
    let mut out = std::io::BufWriter::new(file);
    writeln!(out, "{HEADER}")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let socket = tokio::net::UdpSocket::bind(cmd.listen)
            .await
            .with_context(|| format!("--listen {}: cannot bind", cmd.listen))?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut buf = vec![0u8; 65536];
        let (mut reports, mut bad) = (0u64, 0u64);
        eprintln!("int-collect: listening on {}", cmd.listen);
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                r = socket.recv_from(&mut buf) => {
                    let (n, from) = r?;
                    let at = now_unix_ns();
                    match parse_report(&buf[..n]) {
                        Ok(rep) => {
                            reports += 1;
                            for (i, h) in rep.hops.iter().enumerate() {
                                writeln!(
                                    out,
                                    "{at},{},{},{},{},{i},{},{},{},{},{},{},{},{},{}",
                                    name(rep.node_id),
                                    rep.seq_no,
                                    rep.src,
                                    rep.dst,
                                    h.node_id.map_or(String::new(), name),
                                    opt(h.ingress_port),
                                    opt(h.egress_port),
                                    opt(h.queue_id),
                                    opt(h.queue_occupancy),
                                    opt(h.hop_latency),
                                    opt(h.egress_ts),
                                    opt(h.tx_bytes),
                                    opt(rep.dst_qp),
                                )?;
                            }
                        }
                        Err(e) => {
                            bad += 1;
                            if bad <= 5 {
                                eprintln!("int-collect: ignored a datagram from {from}: {e}");
                            }
                        }
                    }
                }
            }
        }
        out.flush()?;
        eprintln!("int-collect: {reports} reports written, {bad} malformed datagrams ignored");
        anyhow::Ok(())
    })
}
