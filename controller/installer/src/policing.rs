//! A reserved flow's grant as its entry's direct meter
//! (`FsIngress.sr.reservation_meter`): the data plane queues what the flow
//! sends beyond it at the lowest priority, on the same pinned path
//! (p4src/v1model/segment_routing.p4). Priority is lent for the grant only:
//! an entry that stays on the switches for a job's life (a standing pattern)
//! or a job that sends more than it announced cannot starve anyone.

use p4rt::MeterRates;

/// How much the meter lets through above the grant before it demotes: the
/// grant over this long, so a NIC's line-rate burst at the start of a step
/// (or a window that starts a little late) keeps its class.
pub const BURST_WINDOW_NS: u64 = 10_000_000;
/// The least burst: a few jumbo frames, for grants too small for the window
/// to hold them.
pub const MIN_BURST_BYTES: u64 = 64 * 1024;

/// The meter of a flow granted `grant_bps` (bits/s): committed and peak
/// rate both the grant in bytes/s, bursts [`BURST_WINDOW_NS`] of it. `None`
/// for a zero grant (nothing is policed).
pub fn meter_of(grant_bps: u64) -> Option<MeterRates> {
    if grant_bps == 0 {
        return None;
    }
    let rate = exact_on_bmv2(grant_bps.div_ceil(8).min(MAX_RATE));
    let window = u128::from(rate) * u128::from(BURST_WINDOW_NS) / 1_000_000_000;
    // PI holds bursts in 32 bits and reads all-ones as "not configured".
    let burst = (window as u64).clamp(MIN_BURST_BYTES, u64::from(u32::MAX - 1));
    Some(MeterRates {
        cir: rate as i64,
        cburst: burst as i64,
        pir: rate as i64,
        pburst: burst as i64,
    })
}

/// Rates above this (bytes/s, 8 Tb/s) are held at it: no link is faster.
const MAX_RATE: u64 = 1_000_000_000_000;

/// A meter no traffic reaches: what an unpoliced entry carries where the
/// table has a meter. Writing none is not the same on BMv2: it recycles a
/// deleted entry's handle *with its meter configuration*, so an entry
/// inserted without one can be policed at an earlier entry's grant (and
/// reads back with it). ptf-tests/test_policing.py shows both.
pub const UNLIMITED: MeterRates = MeterRates {
    cir: MAX_RATE as i64,
    cburst: u32::MAX as i64 - 1,
    pir: MAX_RATE as i64,
    pburst: u32::MAX as i64 - 1,
};

/// The least rate from `rate` up that BMv2 gives back unchanged. BMv2 keeps
/// a rate per microsecond as a double and PI converts it back by truncation,
/// so some rates read back one byte/s lower; the controller would then see
/// every such entry as changed at each reconciliation.
fn exact_on_bmv2(rate: u64) -> u64 {
    (rate..)
        .find(|&r| ((r as f64 / 1_000_000.0) * 1_000_000.0) as u64 == r)
        .expect("some rate within a few bytes/s reads back")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grant_becomes_both_rates_in_bytes() {
        let m = meter_of(100_000_000_000).unwrap();
        assert_eq!((m.cir, m.pir), (12_500_000_000, 12_500_000_000));
        // 10 ms at 12.5 GB/s.
        assert_eq!((m.cburst, m.pburst), (125_000_000, 125_000_000));
        assert_eq!(meter_of(0), None);
    }

    #[test]
    fn small_grants_get_the_least_burst_and_huge_ones_fit_in_32_bits() {
        let m = meter_of(8_000).unwrap();
        assert_eq!((m.cir, m.cburst), (1_000, MIN_BURST_BYTES as i64));
        let m = meter_of(u64::MAX).unwrap();
        assert_eq!(m.cburst, i64::from(u32::MAX - 1));
        assert!(m.cir >= MAX_RATE as i64);
    }

    #[test]
    fn the_unlimited_meter_reads_back_and_is_above_any_grant() {
        let r = UNLIMITED.cir as u64;
        assert_eq!(((r as f64 / 1e6) * 1e6) as u64, r);
        assert!(meter_of(400_000_000_000_000).unwrap().cir <= UNLIMITED.cir);
    }

    #[test]
    fn every_rate_reads_back_from_bmv2_unchanged() {
        let mut raised = 0;
        for bps in (8..80_000_000u64).step_by(8 * 997) {
            let m = meter_of(bps).unwrap();
            let r = m.cir as u64;
            assert_eq!(((r as f64 / 1e6) * 1e6) as u64, r, "{bps}");
            assert!(r >= bps / 8 && r - bps / 8 <= 4, "{bps} -> {r}");
            raised += usize::from(r != bps / 8);
        }
        // The truncation does bite for some rates (the reason for the search).
        assert!(raised > 0);
    }
}
