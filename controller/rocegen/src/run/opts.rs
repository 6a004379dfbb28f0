//! What a run is told beside the shared spec (`RunOpts`, the kind of `Nic`
//! a host plays) and what it achieved (`Outcome`).

use std::path::PathBuf;

/// The kind of RoCE NIC a host plays: how its receiver treats a PSN gap and
/// how its sender recovers. Every host of a run must play the same kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nic {
    /// RC without out-of-order placement: the receiver drops everything
    /// after a gap and NAKs it once; the sender goes back to the NAKed PSN.
    GoBackN,
    /// Out-of-order placement (as in IRN, Spectrum-X SuperNIC, UET): the
    /// receiver places by PSN and acknowledges selectively; the sender
    /// resends only what is missing.
    OutOfOrder,
}

impl Nic {
    pub fn as_str(self) -> &'static str {
        match self {
            Nic::GoBackN => "gbn",
            Nic::OutOfOrder => "ooo",
        }
    }
}

impl std::str::FromStr for Nic {
    type Err = String;
    fn from_str(s: &str) -> Result<Nic, String> {
        match s {
            "gbn" => Ok(Nic::GoBackN),
            "ooo" => Ok(Nic::OutOfOrder),
            _ => Err(format!(
                "unknown NIC kind {s:?}: gbn (go-back-N) or ooo (out-of-order placement)"
            )),
        }
    }
}

/// Runtime knobs that are not part of the shared spec (lab defaults).
#[derive(Debug, Clone)]
pub struct RunOpts {
    pub spec: PathBuf,
    pub host: String,
    pub out: PathBuf,
    /// Give up this long after start_unix_ns.
    pub timeout_ns: u64,
    /// Go-back-N retransmit timeout without ACK progress.
    pub rto_ns: u64,
    /// Tail-loss probe: with nothing new to send and no ACK progress for
    /// this long, resend the last packet once, so that a lost tail is
    /// answered (ACK or NAK) well before the RTO. 0 disables it.
    pub tlp_ns: u64,
    /// Receiver ACKs every N in-order packets...
    pub ack_every: u32,
    /// ...or this long after the first unacknowledged one.
    pub ack_delay_ns: u64,
    /// DSCP of ACKs and NAKs; `None`: the flow's own (as a NIC does by
    /// default). A class above data keeps them flowing when strict-priority
    /// reserved traffic fills a port.
    pub ack_dscp: Option<u8>,
    pub rate_sample_ns: u64,
    /// Keep answering (re-ACKing) this long after our own work is done, so
    /// a peer whose last ACK was lost can still finish.
    pub linger_ns: u64,
    /// Catch-up bound after a stall: at most this much schedule is sent
    /// back-to-back.
    pub max_burst_ns: u64,
    pub nic: Nic,
    /// Out-of-order NIC: a packet sent once counts as lost when this many
    /// packets beyond it have been acknowledged (shallower reordering costs
    /// nothing).
    pub ooo_threshold: u64,
    /// Go-back-N NIC: also send a CNP (rate-limited like the CE ones) with
    /// the NAK of a PSN gap, as some NICs can be set to do.
    pub cnp_on_ooo: bool,
    pub quiet: bool,
}

impl RunOpts {
    pub fn new(spec: PathBuf, host: String, out: PathBuf) -> RunOpts {
        RunOpts {
            spec,
            host,
            out,
            timeout_ns: 120_000_000_000,
            rto_ns: 200_000_000,
            tlp_ns: 20_000_000,
            ack_every: 16,
            ack_delay_ns: 2_000_000,
            ack_dscp: None,
            rate_sample_ns: 5_000_000,
            linger_ns: 1_000_000_000,
            max_burst_ns: 2_000_000,
            nic: Nic::GoBackN,
            ooo_threshold: 8,
            cnp_on_ooo: false,
            quiet: false,
        }
    }
}

/// What a run achieved.
#[derive(Debug)]
pub struct Outcome {
    pub complete: bool,
    pub incomplete: Vec<String>,
    pub cpu_ns: u64,
    pub wall_ns: u64,
}
