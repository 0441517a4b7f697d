//! The open-loop arrival schedule: when the n-th request is due, at a fixed rate or on a linear
//! ramp. Requests are sent at these times whether or not earlier ones were answered, and their
//! latency counts from here (the intended send time), so a stalled server cannot hide its stall
//! by slowing the generator down (no coordinated omission).

use std::time::Duration;

use anyhow::{Context, Result, bail};

/// `RATE` (fixed) or `FROM:TO:OVER` (linear ramp from FROM/s to TO/s over OVER, then TO/s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSpec {
    pub from: f64,
    pub to: f64,
    pub ramp: Duration,
}

impl RateSpec {
    pub fn fixed(rate: f64) -> Self {
        Self {
            from: rate,
            to: rate,
            ramp: Duration::ZERO,
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split(':').collect();
        let rate = |p: &str| -> Result<f64> {
            let r: f64 = p.trim().parse().with_context(|| format!("rate {p:?}"))?;
            if !(r.is_finite() && r >= 0.0) {
                bail!("rate {p:?}: a number of requests per second, not negative");
            }
            Ok(r)
        };
        let spec = match parts.as_slice() {
            [r] => Self::fixed(rate(r)?),
            [from, to, over] => Self {
                from: rate(from)?,
                to: rate(to)?,
                ramp: crate::units::parse_duration(over)?,
            },
            _ => bail!("--rate {s:?}: RATE or FROM:TO:DURATION (e.g. 2000 or 1000:5000:30s)"),
        };
        if spec.to <= 0.0 {
            bail!("--rate {s:?}: the final rate must be above 0");
        }
        Ok(spec)
    }

    /// Requests due in the first `t` of the schedule.
    pub fn count_by(&self, t: Duration) -> f64 {
        let t = t.as_secs_f64();
        let ramp = self.ramp.as_secs_f64();
        // A fixed rate has no ramp (and 0/0 would make every request due at once).
        if t <= ramp && ramp > 0.0 {
            self.from * t + (self.to - self.from) * t * t / (2.0 * ramp)
        } else {
            self.from * ramp + (self.to - self.from) * ramp / 2.0 + self.to * (t - ramp)
        }
    }

    /// When request `n` (from 0) is due: the inverse of [`Self::count_by`].
    pub fn due(&self, n: u64) -> Duration {
        let n = n as f64;
        let ramp = self.ramp.as_secs_f64();
        let in_ramp = self.count_by(self.ramp);
        let t = if n <= in_ramp && ramp > 0.0 {
            // from·t + a·t² = n with a = (to − from) / (2·ramp).
            let a = (self.to - self.from) / (2.0 * ramp);
            if a.abs() < 1e-12 {
                n / self.from
            } else {
                (-self.from + (self.from * self.from + 4.0 * a * n).max(0.0).sqrt()) / (2.0 * a)
            }
        } else {
            ramp + (n - in_ramp) / self.to
        };
        Duration::from_secs_f64(t.max(0.0))
    }
}

impl std::fmt::Display for RateSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ramp.is_zero() {
            write!(f, "{}/s", self.to)
        } else {
            write!(f, "{}/s to {}/s over {:?}", self.from, self.to, self.ramp)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Duration, b: f64) -> bool {
        (a.as_secs_f64() - b).abs() < 1e-9
    }

    #[test]
    fn a_fixed_rate_is_evenly_spaced() {
        let r = RateSpec::parse("2000").unwrap();
        assert!(close(r.due(0), 0.0));
        assert!(close(r.due(1), 0.0005));
        assert!(close(r.due(2000), 1.0));
        assert!((r.count_by(Duration::from_secs(3)) - 6000.0).abs() < 1e-6);
    }

    #[test]
    fn a_ramp_accelerates_then_holds() {
        let r = RateSpec::parse("1000:5000:30s").unwrap();
        // Over the ramp the mean rate is 3000/s: 90,000 requests by 30 s, then 5000/s.
        assert!((r.count_by(Duration::from_secs(30)) - 90_000.0).abs() < 1e-6);
        assert!(close(r.due(90_000), 30.0));
        assert!(close(r.due(95_000), 31.0));
        // Inverse of count_by inside the ramp.
        for n in [1u64, 10, 1000, 50_000, 89_999] {
            let t = r.due(n);
            assert!((r.count_by(t) - n as f64).abs() < 1e-3, "n={n}");
        }
        // Gaps shrink as the rate rises.
        let gap = |n| r.due(n + 1) - r.due(n);
        assert!(gap(10) > gap(80_000));
        // A ramp from 0 and a ramp down work too.
        let up = RateSpec::parse("0:100:10s").unwrap();
        assert!((up.count_by(up.due(42)) - 42.0).abs() < 1e-6);
        let down = RateSpec::parse("100:10:10s").unwrap();
        assert!((down.count_by(down.due(500)) - 500.0).abs() < 1e-6);
    }

    #[test]
    fn bad_specs_are_refused() {
        for s in [
            "",
            "x",
            "-5",
            "0",
            "1:2",
            "1:2:3:4",
            "1:0:5s",
            "1:2:forever",
        ] {
            assert!(RateSpec::parse(s).is_err(), "{s}");
        }
    }
}
