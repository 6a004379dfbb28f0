//! The reordering model's flags, shared by `foresight sim run`, `table`
//! and `lab`.

use clap::Args;
use sim::reorder::ReorderModel;

/// The reordering model of spraying and flowlets on go-back-N NICs
/// (`controller/sim/README.md`, `sim::reorder`).
#[derive(Args, Clone)]
pub(super) struct ReorderArgs {
    /// Packet payload, bytes (a go-back-N rewind resends whole packets).
    #[arg(long, default_value_t = 4096)]
    mtu: u32,
    /// Base round-trip time, µs: a rewind resends the flow's rate × RTT.
    #[arg(long, default_value_t = 8.0)]
    rtt_us: f64,
    /// Mean wait at a saturated port, packets (DCQCN's standing queue; caps
    /// the M/D/1 queueing delay a fluid bottleneck would make infinite).
    #[arg(long, default_value_t = 25.0)]
    max_queue_pkts: f64,
    /// Packets a NIC sends back to back from one QP (1: evenly interleaved).
    #[arg(long, default_value_t = 1)]
    nic_burst: u32,
    /// Flowlet timeout, µs: a new flowlet overtakes the old one only when
    /// two paths' delays differ by more.
    #[arg(long, default_value_t = 50.0)]
    flowlet_timeout_us: f64,
    /// Go-back-N NICs also send a CNP on an out-of-order packet (DCQCN cuts
    /// the sender's rate).
    #[arg(long)]
    cnp_on_ooo: bool,
    /// Least time between two CNPs of a QP, µs.
    #[arg(long, default_value_t = 50.0)]
    cnp_interval_us: f64,
    /// DCQCN's lowest rate, fraction of the sender's share.
    #[arg(long, default_value_t = 0.05)]
    cnp_floor: f64,
}

impl ReorderArgs {
    /// The model, with `seed` for the flowlet draws.
    pub(super) fn model(&self, seed: u64) -> anyhow::Result<ReorderModel> {
        let m = ReorderModel {
            packet_bits: f64::from(self.mtu) * 8.0,
            rtt_ns: self.rtt_us * 1e3,
            max_queue_pkts: self.max_queue_pkts,
            nic_burst: self.nic_burst,
            flowlet_timeout_ns: self.flowlet_timeout_us * 1e3,
            cnp_on_ooo: self.cnp_on_ooo,
            cnp_interval_ns: self.cnp_interval_us * 1e3,
            cnp_floor: self.cnp_floor,
            seed,
        };
        m.check()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        reorder: ReorderArgs,
    }

    /// The flags' defaults are the model's documented defaults.
    #[test]
    fn reorder_flag_defaults_are_the_model_defaults() {
        let cli = Cli::try_parse_from(["sim"]).unwrap();
        assert_eq!(cli.reorder.model(0).unwrap(), ReorderModel::default());
        let cli = Cli::try_parse_from(["sim", "--nic-burst", "0"]).unwrap();
        let e = cli.reorder.model(0).unwrap_err().to_string();
        assert!(e.contains("--nic-burst"), "{e}");
    }
}
