use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use rocegen::gen::{self, Background, GenOpts};
use rocegen::run::{self, Nic, RunOpts};

/// RoCEv2 traffic generator with go-back-N or out-of-order NICs and a DCQCN
/// reaction point.
#[derive(Parser)]
#[command(name = "rocegen", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write an experiment spec (JSON).
    #[command(subcommand)]
    Spec(SpecCmd),
    /// Run one host's flows (as root, inside the host's network namespace).
    Run(RunArgs),
    /// Check a spec file and print a one-line summary.
    Check {
        #[arg(long)]
        spec: PathBuf,
    },
}

#[derive(Subcommand)]
enum SpecCmd {
    /// Ring all-reduce: 2(N-1) steps over K channels.
    RingAllreduce {
        #[command(flatten)]
        common: Common,
        /// Parallel rings (each with its own QP pair per neighbour).
        #[arg(long, default_value_t = 1)]
        channels: usize,
    },
    /// Every host sends bytes/(N-1) to every other host at once.
    AllToAll {
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
struct Common {
    /// NAME=IPv4 list, comma-separated, in ring order.
    #[arg(long)]
    hosts: String,
    /// Bytes per rank (buffer size being reduced / exchanged).
    #[arg(long)]
    bytes: u64,
    #[arg(long, default_value_t = 1)]
    qp_seed: u64,
    /// Initial and maximum rate of each collective flow.
    #[arg(long)]
    line_rate_pps: f64,
    /// Extra long flow SRC:DST:BYTES:RATE_PPS (repeatable).
    #[arg(long)]
    background: Vec<Background>,
    /// start_unix_ns = now + this.
    #[arg(long, default_value_t = 2000)]
    start_in_ms: u64,
    #[arg(long, default_value_t = 1024)]
    payload_bytes: u32,
    #[arg(long, default_value_t = 24)]
    dscp: u8,
    /// Output file ("-" = stdout).
    #[arg(short = 'o', long, default_value = "-")]
    out: String,
}

#[derive(Args)]
struct RunArgs {
    #[arg(long)]
    spec: PathBuf,
    /// This host's name in the spec.
    #[arg(long)]
    host: String,
    /// Directory for flows-HOST.csv and rate-HOST.csv.
    #[arg(long)]
    out: PathBuf,
    /// Give up this long after the spec's start (exit 2).
    #[arg(long, default_value_t = 120.0)]
    timeout_s: f64,
    /// Retransmit timeout without ACK progress (go-back-N).
    #[arg(long, default_value_t = 200.0)]
    rto_ms: f64,
    /// Tail-loss probe: resend the last packet once after this long
    /// without ACK progress at a flow's tail (0 = off, wait for the RTO).
    #[arg(long, default_value_t = 20.0)]
    tlp_ms: f64,
    /// Receiver ACKs every N in-order packets (and on message ends).
    #[arg(long, default_value_t = 16)]
    ack_every: u32,
    /// ...or this long after the first unacknowledged packet.
    #[arg(long, default_value_t = 2.0)]
    ack_delay_ms: f64,
    /// DSCP of ACKs and NAKs (default: the flow's own DSCP).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    ack_dscp: Option<u8>,
    #[arg(long, default_value_t = 5.0)]
    rate_sample_ms: f64,
    /// Keep answering after our own flows are done (peer's lost last ACK).
    #[arg(long, default_value_t = 1000.0)]
    linger_ms: f64,
    /// NIC kind: gbn (go-back-N: NAK a PSN gap, the sender goes back) or
    /// ooo (place by PSN, selective ACKs, resend only what is missing).
    /// Every host of a run needs the same.
    #[arg(long, default_value = "gbn")]
    nic: Nic,
    /// ooo: a packet counts as lost once this many packets beyond it are
    /// acknowledged.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    ooo_threshold: u64,
    /// gbn: also send a CNP with the NAK of a PSN gap (rate-limited like CE
    /// CNPs), as some NICs can.
    #[arg(long)]
    cnp_on_ooo: bool,
    /// No per-second progress lines.
    #[arg(long)]
    quiet: bool,
}

fn ms(v: f64) -> u64 {
    (v.max(0.0) * 1e6) as u64
}

fn write_spec(c: &Common, spec: &rocegen::spec::Spec) -> Result<()> {
    let text = serde_json::to_string_pretty(spec)? + "\n";
    if c.out == "-" {
        print!("{text}");
    } else {
        std::fs::write(&c.out, text).with_context(|| format!("writing {}", c.out))?;
        eprintln!(
            "rocegen: wrote {} ({} flows, {} hosts)",
            c.out,
            spec.flows.len(),
            spec.hosts.len()
        );
    }
    Ok(())
}

fn gen_opts(c: &Common) -> Result<GenOpts> {
    Ok(GenOpts {
        hosts: gen::parse_hosts(&c.hosts)?,
        bytes: c.bytes,
        qp_seed: c.qp_seed,
        line_rate_pps: c.line_rate_pps,
        payload_bytes: c.payload_bytes,
        dscp: c.dscp,
        start_unix_ns: rocegen::sys::unix_now_ns() + c.start_in_ms * 1_000_000,
        background: c.background.clone(),
    })
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rocegen: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn real_main() -> Result<ExitCode> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Spec(SpecCmd::RingAllreduce { common, channels }) => {
            let spec = gen::ring_allreduce(&gen_opts(&common)?, channels)?;
            write_spec(&common, &spec)?;
        }
        Cmd::Spec(SpecCmd::AllToAll { common }) => {
            let spec = gen::all_to_all(&gen_opts(&common)?)?;
            write_spec(&common, &spec)?;
        }
        Cmd::Check { spec } => {
            let s = rocegen::spec::Spec::load(&spec)?;
            let bytes: u64 = s.flows.iter().map(|f| f.bytes).sum();
            println!(
                "ok: {} hosts, {} flows, {} connections, {bytes} bytes",
                s.hosts.len(),
                s.flows.len(),
                s.connections().len()
            );
        }
        Cmd::Run(a) => {
            let mut o = RunOpts::new(a.spec, a.host, a.out);
            o.timeout_ns = (a.timeout_s.max(0.0) * 1e9) as u64;
            o.rto_ns = ms(a.rto_ms);
            o.tlp_ns = ms(a.tlp_ms);
            o.ack_every = a.ack_every.max(1);
            o.ack_delay_ns = ms(a.ack_delay_ms);
            o.ack_dscp = a.ack_dscp;
            o.rate_sample_ns = ms(a.rate_sample_ms).max(100_000);
            o.linger_ns = ms(a.linger_ms);
            if a.cnp_on_ooo && a.nic != Nic::GoBackN {
                anyhow::bail!(
                    "--cnp-on-ooo is for --nic gbn (an ooo NIC places reordered packets)"
                );
            }
            o.nic = a.nic;
            o.ooo_threshold = a.ooo_threshold;
            o.cnp_on_ooo = a.cnp_on_ooo;
            o.quiet = a.quiet;
            let host = o.host.clone();
            let out = run::run(o)?;
            if !out.complete {
                eprintln!(
                    "rocegen {host}: timed out; incomplete flows: {}",
                    out.incomplete.join(", ")
                );
                return Ok(ExitCode::from(2));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
