//! Milliseconds given on the command line or in a demand file, as the
//! nanoseconds the controller and NDSP count in.

use anyhow::bail;

/// The largest number of milliseconds whose nanoseconds fit in a `u64`
/// (about 584 years): the bound for values that have no tighter one.
pub const MAX_MS: f64 = (u64::MAX / 1_000_000) as f64;

/// `ms` milliseconds as nanoseconds, rounded to the nearest: `0.1` is
/// 100 000 ns (a decimal fraction of a millisecond is seldom exact in
/// binary, and truncating would give 99 999). `what` names the value in
/// the error; `max_ms` is the largest value allowed ([`MAX_MS`] when only
/// the `u64` bounds it). NaN, infinities and negative values are errors.
pub fn ms_to_ns(what: &str, ms: f64, max_ms: f64) -> anyhow::Result<u64> {
    let max_ms = max_ms.min(MAX_MS);
    if !(ms.is_finite() && (0.0..=max_ms).contains(&ms)) {
        if max_ms == MAX_MS {
            bail!("{what} must be a non-negative number of milliseconds, not {ms}");
        }
        bail!("{what}: want milliseconds from 0 to {max_ms}, not {ms}");
    }
    Ok((ms * 1e6).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_the_nearest_nanosecond() {
        assert_eq!(ms_to_ns("x", 0.1, MAX_MS).unwrap(), 100_000);
        assert_eq!(ms_to_ns("x", 0.0000004, MAX_MS).unwrap(), 0);
        assert_eq!(ms_to_ns("x", 0.0000006, MAX_MS).unwrap(), 1);
        assert_eq!(ms_to_ns("x", 2.5, 10.0).unwrap(), 2_500_000);
        assert_eq!(ms_to_ns("x", 0.0, 10.0).unwrap(), 0);
    }

    #[test]
    fn the_bounds_are_inclusive_and_errors_name_the_value() {
        assert_eq!(
            ms_to_ns("--gap-ms", 3_600_000.0, 3_600_000.0).unwrap(),
            3_600_000_000_000
        );
        let e = ms_to_ns("--gap-ms", 3_600_000.5, 3_600_000.0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--gap-ms: want milliseconds from 0 to 3600000, not 3600000.5"
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = ms_to_ns("--start-in-ms", bad, MAX_MS).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with("--start-in-ms must be a non-negative number of milliseconds"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_largest_value_fits_and_a_larger_one_is_refused() {
        // Within an f64's precision (2 048 ns up there) of the exact value.
        let ns = ms_to_ns("x", MAX_MS, MAX_MS).unwrap();
        assert!(
            ns.abs_diff(u64::MAX / 1_000_000 * 1_000_000) < 2_048,
            "{ns}"
        );
        assert!(ms_to_ns("x", MAX_MS * 2.0, MAX_MS).is_err());
        assert!(ms_to_ns("x", MAX_MS * 2.0, f64::INFINITY).is_err());
    }
}
