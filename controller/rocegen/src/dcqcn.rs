//! DCQCN reaction point (Zhu et al., SIGCOMM 2015) as a pure state machine.
//!
//! Time is passed in explicitly (ns) so the numbers can be unit-tested; the
//! runtime calls [`Rp::advance`] before reading the rate and
//! [`Rp::next_deadline`] to know when to wake up.

use serde::{Deserialize, Serialize};

/// Reaction/notification point parameters. Lab defaults are scaled to
/// BMv2 rates (hundreds of pps per link); hardware values are in README.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DcqcnParams {
    /// EWMA gain of alpha.
    pub g: f64,
    /// Alpha after the first CNP starts from this value.
    pub initial_alpha: f64,
    /// Alpha decays once per period without CNP.
    pub alpha_timer_ns: u64,
    /// Rate-increase timer period (T).
    pub increase_timer_ns: u64,
    /// Byte counter (B); `None` = 64 packets of the spec's payload.
    pub byte_counter_bytes: Option<u64>,
    /// Fast-recovery steps (F).
    pub fast_recovery_steps: u32,
    /// Additive increase, fraction of line rate.
    pub rai_frac: f64,
    /// Hyper increase, fraction of line rate.
    pub rhai_frac: f64,
    /// Rate floor, fraction of line rate.
    pub rmin_frac: f64,
    /// Notification point: at most one CNP per flow per interval.
    pub cnp_interval_ns: u64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        DcqcnParams {
            g: 1.0 / 16.0,
            initial_alpha: 1.0,
            alpha_timer_ns: 5_000_000,
            increase_timer_ns: 15_000_000,
            byte_counter_bytes: None,
            fast_recovery_steps: 5,
            rai_frac: 0.05,
            rhai_frac: 0.25,
            rmin_frac: 0.01,
            cnp_interval_ns: 5_000_000,
        }
    }
}

impl DcqcnParams {
    /// Checks ranges; errors name the field below `path`.
    pub fn validate(&self, path: &str) -> Result<(), String> {
        let frac = |name: &str, v: f64, lo_open: bool| {
            let ok = v.is_finite() && v <= 1.0 && if lo_open { v > 0.0 } else { v >= 0.0 };
            if ok {
                Ok(())
            } else {
                Err(format!("{path}.{name}: {v} must be in (0, 1]"))
            }
        };
        frac("g", self.g, true)?;
        frac("initial_alpha", self.initial_alpha, true)?;
        frac("rai_frac", self.rai_frac, true)?;
        frac("rhai_frac", self.rhai_frac, true)?;
        frac("rmin_frac", self.rmin_frac, true)?;
        for (name, v) in [
            ("alpha_timer_ns", self.alpha_timer_ns),
            ("increase_timer_ns", self.increase_timer_ns),
        ] {
            if v == 0 {
                return Err(format!("{path}.{name}: must be > 0"));
            }
        }
        if self.byte_counter_bytes == Some(0) {
            return Err(format!("{path}.byte_counter_bytes: must be > 0"));
        }
        if self.fast_recovery_steps == 0 {
            return Err(format!("{path}.fast_recovery_steps: must be > 0"));
        }
        Ok(())
    }
}

/// Which increase rule the last increase event applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// No CNP seen yet: sending at line rate, timers off (as on NICs).
    Idle,
    FastRecovery,
    Additive,
    Hyper,
}

/// Reaction point state of one QP.
#[derive(Debug, Clone)]
pub struct Rp {
    line_rate: f64,
    rai: f64,
    rhai: f64,
    rmin: f64,
    g: f64,
    initial_alpha: f64,
    f: u32,
    alpha_period: u64,
    inc_period: u64,
    byte_counter: u64,
    rc: f64,
    rt: f64,
    alpha: f64,
    active: bool,
    /// Timer (T) and byte-counter (BC) increase-event counts since last CNP.
    t_count: u32,
    bc_count: u32,
    bytes_acc: u64,
    next_alpha: u64,
    next_inc: u64,
    stage: Stage,
    cnps: u64,
}

impl Rp {
    pub fn new(p: &DcqcnParams, line_rate_pps: f64, payload_bytes: u64) -> Rp {
        Rp {
            line_rate: line_rate_pps,
            rai: p.rai_frac * line_rate_pps,
            rhai: p.rhai_frac * line_rate_pps,
            rmin: p.rmin_frac * line_rate_pps,
            g: p.g,
            initial_alpha: p.initial_alpha,
            f: p.fast_recovery_steps,
            alpha_period: p.alpha_timer_ns,
            inc_period: p.increase_timer_ns,
            byte_counter: p.byte_counter_bytes.unwrap_or(64 * payload_bytes).max(1),
            rc: line_rate_pps,
            rt: line_rate_pps,
            alpha: p.initial_alpha,
            active: false,
            t_count: 0,
            bc_count: 0,
            bytes_acc: 0,
            next_alpha: u64::MAX,
            next_inc: u64::MAX,
            stage: Stage::Idle,
            cnps: 0,
        }
    }

    /// Current rate Rc (pps).
    pub fn rate(&self) -> f64 {
        self.rc
    }
    pub fn target(&self) -> f64 {
        self.rt
    }
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    pub fn stage(&self) -> Stage {
        self.stage
    }
    pub fn cnps(&self) -> u64 {
        self.cnps
    }

    /// Earliest timer that [`Rp::advance`] must process (u64::MAX if none).
    pub fn next_deadline(&self) -> u64 {
        self.next_alpha.min(self.next_inc)
    }

    /// Rate cut on a CNP. Timers run before so that events due earlier are
    /// applied first.
    pub fn on_cnp(&mut self, now: u64) {
        self.advance(now);
        if !self.active {
            self.active = true;
            self.alpha = self.initial_alpha;
        }
        self.cnps += 1;
        self.rt = self.rc;
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.rmin);
        self.alpha = (1.0 - self.g) * self.alpha + self.g;
        self.t_count = 0;
        self.bc_count = 0;
        self.bytes_acc = 0;
        self.next_alpha = now.saturating_add(self.alpha_period);
        self.next_inc = now.saturating_add(self.inc_period);
        self.stage = Stage::FastRecovery;
    }

    /// Byte counter: one increase event per B bytes sent.
    pub fn on_sent(&mut self, bytes: u64, now: u64) {
        self.advance(now);
        if !self.active {
            return;
        }
        self.bytes_acc += bytes;
        while self.bytes_acc >= self.byte_counter {
            self.bytes_acc -= self.byte_counter;
            self.bc_count = self.bc_count.saturating_add(1);
            self.increase();
        }
    }

    /// Runs the alpha and increase timers up to `now`, in time order.
    pub fn advance(&mut self, now: u64) {
        while self.active && self.next_deadline() <= now {
            if self.next_alpha <= self.next_inc {
                self.alpha *= 1.0 - self.g;
                self.next_alpha = self.next_alpha.saturating_add(self.alpha_period);
            } else {
                self.t_count = self.t_count.saturating_add(1);
                self.increase();
                self.next_inc = self.next_inc.saturating_add(self.inc_period);
            }
        }
    }

    fn increase(&mut self) {
        let hi = self.t_count.max(self.bc_count);
        let lo = self.t_count.min(self.bc_count);
        if hi < self.f {
            self.stage = Stage::FastRecovery;
        } else if lo > self.f {
            self.stage = Stage::Hyper;
            self.rt += f64::from(lo - self.f) * self.rhai;
        } else {
            self.stage = Stage::Additive;
            self.rt += self.rai;
        }
        self.rt = self.rt.min(self.line_rate);
        self.rc = ((self.rt + self.rc) / 2.0).clamp(self.rmin, self.line_rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    fn params() -> DcqcnParams {
        DcqcnParams {
            byte_counter_bytes: Some(1_000_000_000), // timer-driven only
            ..DcqcnParams::default()
        }
    }

    #[test]
    fn idle_until_first_cnp() {
        let mut rp = Rp::new(&params(), 400.0, 1024);
        rp.advance(10_000 * MS);
        rp.on_sent(10_000_000, 10_000 * MS);
        assert_eq!(rp.rate(), 400.0);
        assert_eq!(rp.alpha(), 1.0);
        assert_eq!(rp.stage(), Stage::Idle);
        assert_eq!(rp.next_deadline(), u64::MAX);
    }

    #[test]
    fn first_decrease_numbers() {
        let mut rp = Rp::new(&params(), 400.0, 1024);
        rp.on_cnp(100 * MS);
        // alpha=1: Rc halves, Rt keeps the old rate, alpha = 15/16 + 1/16 = 1.
        close(rp.rate(), 200.0);
        close(rp.target(), 400.0);
        close(rp.alpha(), 1.0);
        // Second CNP 1 ms later (no timer fired): Rc = 200 * (1 - 1/2).
        rp.on_cnp(101 * MS);
        close(rp.rate(), 100.0);
        close(rp.target(), 200.0);
        // Alpha decays every 5 ms without CNP: 106, 111 ms -> (15/16)^2.
        rp.advance(111 * MS);
        close(rp.alpha(), (15.0f64 / 16.0).powi(2));
        // Next cut uses the decayed alpha.
        let a = rp.alpha();
        let rc = rp.rate();
        rp.on_cnp(112 * MS);
        close(rp.rate(), rc * (1.0 - a / 2.0));
        close(rp.alpha(), (1.0 - 1.0 / 16.0) * a + 1.0 / 16.0);
    }

    #[test]
    fn recovery_stages_by_timer() {
        let mut p = params();
        p.alpha_timer_ns = 1000 * MS; // keep alpha out of the picture
        let mut rp = Rp::new(&p, 400.0, 1024);
        rp.on_cnp(0);
        close(rp.rate(), 200.0);
        let (mut rc, mut rt) = (200.0, 400.0);
        // F=5 fast-recovery events: Rc=(Rt+Rc)/2, Rt unchanged.
        for k in 1..=4 {
            rp.advance(k * 15 * MS);
            rc = (rt + rc) / 2.0;
            close(rp.rate(), rc);
            close(rp.target(), rt);
            assert_eq!(rp.stage(), Stage::FastRecovery);
        }
        // T reaches F=5 while BC=0: additive (Rai = 5% of 400 = 20), but
        // Rt is capped at line rate.
        rp.advance(5 * 15 * MS);
        assert_eq!(rp.stage(), Stage::Additive);
        rt = (rt + 20.0f64).min(400.0);
        rc = (rt + rc) / 2.0;
        close(rp.rate(), rc);
        close(rp.target(), 400.0);
    }

    #[test]
    fn additive_then_hyper_from_lower_target() {
        let mut p = params();
        p.alpha_timer_ns = 1000 * MS;
        p.byte_counter_bytes = Some(1000);
        let mut rp = Rp::new(&p, 1000.0, 1000);
        rp.on_cnp(0); // Rc=500 Rt=1000
        rp.on_cnp(1); // Rc=250 Rt=500
        let (mut rc, mut rt) = (250.0, 500.0);
        // 6 byte-counter events then 6 timer events: BC=1..6 with T=0 ->
        // fast recovery x4 (BC<5), additive at BC=5, BC=6 (T=0 <= F).
        for bc in 1..=6u32 {
            rp.on_sent(1000, 2);
            if bc >= 5 {
                rt += 50.0;
                assert_eq!(rp.stage(), Stage::Additive);
            } else {
                assert_eq!(rp.stage(), Stage::FastRecovery);
            }
            rc = (rt + rc) / 2.0;
            close(rp.rate(), rc);
            close(rp.target(), rt);
        }
        // Timer events raise T; once T=6 > F and BC=6 > F: hyper, i = 1.
        for t in 1..=6u32 {
            rp.advance(1 + u64::from(t) * 15 * MS);
            if t <= 5 {
                rt += 50.0;
                assert_eq!(rp.stage(), Stage::Additive);
            } else {
                rt += 250.0;
                assert_eq!(rp.stage(), Stage::Hyper);
            }
            rt = rt.min(1000.0);
            rc = (rt + rc) / 2.0;
            close(rp.target(), rt);
            close(rp.rate(), rc);
        }
    }

    #[test]
    fn floor_and_cap() {
        let mut rp = Rp::new(&params(), 400.0, 1024);
        for i in 0..50 {
            rp.on_cnp(i); // alpha stays 1: halves each time
        }
        close(rp.rate(), 4.0); // Rmin = 1% of 400
                               // Long quiet period: climbs back to, never above, line rate.
        rp.advance(100_000 * MS);
        assert!(rp.rate() <= 400.0 && rp.rate() > 399.0, "{}", rp.rate());
        close(rp.target(), 400.0);
        assert!(rp.alpha() < 1e-6);
    }

    #[test]
    fn params_validation_names_field() {
        let p = DcqcnParams {
            g: 0.0,
            ..DcqcnParams::default()
        };
        assert_eq!(
            p.validate("dcqcn").unwrap_err(),
            "dcqcn.g: 0 must be in (0, 1]"
        );
        let p = DcqcnParams {
            increase_timer_ns: 0,
            ..DcqcnParams::default()
        };
        assert!(p
            .validate("dcqcn")
            .unwrap_err()
            .starts_with("dcqcn.increase_timer_ns"));
    }
}
