//! What every request shares: the timing flags (`Timing`) and the start,
//! duration, rate and recurrence they give, the priority class, the
//! request header, default ids, sizes with units and QP ranges.

use anyhow::bail;
use clap::{Args, ValueEnum};
use ndsp::proto;

use crate::cmd::millis::{ms_to_ns, MAX_MS};
use crate::daemon::now_unix_ns;

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Priority {
    Background,
    Standard,
    IterationBlocking,
    LatencyCritical,
}

impl Priority {
    pub(super) fn wire(self) -> i32 {
        (match self {
            Priority::Background => proto::PriorityClass::Background,
            Priority::Standard => proto::PriorityClass::Standard,
            Priority::IterationBlocking => proto::PriorityClass::IterationBlocking,
            Priority::LatencyCritical => proto::PriorityClass::LatencyCritical,
        }) as i32
    }
}

#[derive(Args)]
pub(super) struct Timing {
    /// Start this many milliseconds from now.
    #[arg(long, default_value_t = 100.0)]
    start_in_ms: f64,
    /// Expected duration in milliseconds.
    #[arg(long, conflicts_with = "rate_gbps")]
    duration_ms: Option<f64>,
    /// Expected rate in Gbit/s (per flow for a collective).
    #[arg(long)]
    rate_gbps: Option<f64>,
    /// Priority class.
    #[arg(long, value_enum, default_value = "iteration-blocking")]
    pub(super) priority: Priority,
    /// The controller may defer or slow it.
    #[arg(long)]
    pub(super) elastic: bool,
    /// Must complete within this many milliseconds from now.
    #[arg(long)]
    pub(super) deadline_ms: Option<f64>,
    /// Repeat every this many milliseconds ...
    #[arg(long, requires = "occurrences")]
    period_ms: Option<f64>,
    /// ... this many times in all.
    #[arg(long, requires = "period_ms")]
    occurrences: Option<u32>,
}

pub(super) fn parse_size(s: &str) -> Result<u64, String> {
    planner::demand::parse_bytes(s)
}

/// "FIRST-LAST", inclusive, each decimal or 0x hex, as a QP range (the
/// controller checks the QPs themselves).
pub(super) fn parse_qp_choices(s: &str) -> Result<proto::QpRange, String> {
    let bad =
        |why: String| format!("QP choices '{s}': {why} (want FIRST-LAST, for example 0x100-0x1ff)");
    let (a, b) = s.split_once('-').ok_or_else(|| bad("no '-'".into()))?;
    let qp = |t: &str| {
        let t = t.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => t.parse::<u32>(),
        }
        .map_err(|_| bad(format!("'{t}' is not a number")))
    };
    let (first, last) = (qp(a)?, qp(b)?);
    if last < first {
        return Err(bad("the last QP is below the first".into()));
    }
    Ok(proto::QpRange {
        first_qp: first,
        count: last - first + 1,
    })
}

pub(super) fn header(tenant: &str) -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(ndsp::PROTOCOL_VERSION.into()),
        tenant: tenant.into(),
    })
}

pub(super) fn default_id(prefix: &str) -> String {
    format!("{prefix}-{}", now_unix_ns() / 1_000_000)
}

/// Start offset, duration, rate and recurrence from the timing flags.
pub(super) type TimingFields = (u64, Option<u64>, Option<u64>, Option<proto::Recurrence>);

pub(super) fn timing_fields(t: &Timing) -> anyhow::Result<TimingFields> {
    let start = ms_to_ns("--start-in-ms", t.start_in_ms, MAX_MS)?;
    let duration = t
        .duration_ms
        .map(|d| ms_to_ns("--duration-ms", d, MAX_MS))
        .transpose()?;
    let rate = match t.rate_gbps {
        Some(r) if r.is_finite() && r > 0.0 => Some((r * 1e9).round() as u64),
        Some(_) => bail!("--rate-gbps must be a positive number"),
        None => None,
    };
    if duration.is_none() && rate.is_none() {
        bail!("give --duration-ms or --rate-gbps");
    }
    let recurrence = match (t.period_ms, t.occurrences) {
        (Some(p), Some(n)) => Some(proto::Recurrence {
            period_ns: ms_to_ns("--period-ms", p, MAX_MS)?,
            occurrences: n,
        }),
        _ => None,
    };
    Ok((start, duration, rate, recurrence))
}
