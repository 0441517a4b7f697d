//! The open-loop arrival schedule: when the n-th request is due, at a fixed rate, on linear
//! ramps or in steps. Requests are sent at these times whether or not earlier ones were
//! answered, and their latency counts from here (the intended send time), so a stalled server
//! cannot hide its stall by slowing the generator down (no coordinated omission).

use std::time::Duration;

use anyhow::{Context, Result, bail};

/// A stretch of the schedule whose rate goes linearly from `from` to `to` (equal: a step).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Segment {
    from: f64,
    to: f64,
    secs: f64,
}

impl Segment {
    #[cfg(test)]
    fn count_by(&self, t: f64) -> f64 {
        self.from * t + (self.to - self.from) * t * t / (2.0 * self.secs)
    }

    fn count(&self) -> f64 {
        (self.from + self.to) / 2.0 * self.secs
    }

    /// When the n-th request of this segment is due: from·t + a·t² = n, a = (to − from)/(2·secs).
    fn due(&self, n: f64) -> f64 {
        let a = (self.to - self.from) / (2.0 * self.secs);
        if a.abs() < 1e-12 {
            n / self.from
        } else {
            (-self.from + (self.from * self.from + 4.0 * a * n).max(0.0).sqrt()) / (2.0 * a)
        }
    }
}

/// `RATE` (fixed), `FROM:TO:OVER` (a linear ramp, then TO/s) or `R1,R2,R3@EACH` (steps of EACH,
/// then the last rate).
#[derive(Debug, Clone, PartialEq)]
pub struct RateSpec {
    segments: Vec<Segment>,
    /// The rate after the last segment, for ever.
    hold: f64,
    text: String,
}

fn rate(p: &str) -> Result<f64> {
    let r: f64 = p.trim().parse().with_context(|| format!("rate {p:?}"))?;
    if !(r.is_finite() && r >= 0.0) {
        bail!("rate {p:?}: a number of requests per second, not negative");
    }
    Ok(r)
}

impl RateSpec {
    pub fn fixed(rate: f64) -> Self {
        Self {
            segments: Vec::new(),
            hold: rate,
            text: format!("{rate}/s"),
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        let usage = || {
            format!(
                "--rate {s:?}: RATE, FROM:TO:DURATION or R1,R2,...@DURATION (e.g. 2000, 1000:5000:30s, 1000,2000,4000@10s)"
            )
        };
        let spec = if let Some((rates, each)) = s.split_once('@') {
            let each = crate::units::parse_duration(each)?.as_secs_f64();
            let rates = rates.split(',').map(rate).collect::<Result<Vec<_>>>()?;
            if each <= 0.0 || rates.is_empty() {
                bail!(usage());
            }
            Self {
                segments: rates
                    .iter()
                    .map(|&r| Segment {
                        from: r,
                        to: r,
                        secs: each,
                    })
                    .collect(),
                hold: *rates.last().unwrap(),
                text: format!(
                    "steps of {each} s at {}/s",
                    rates
                        .iter()
                        .map(f64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        } else {
            match s.split(':').collect::<Vec<_>>().as_slice() {
                [r] => Self::fixed(rate(r)?),
                [from, to, over] => {
                    let (from, to) = (rate(from)?, rate(to)?);
                    let over = crate::units::parse_duration(over)?;
                    Self {
                        segments: (!over.is_zero())
                            .then_some(Segment {
                                from,
                                to,
                                secs: over.as_secs_f64(),
                            })
                            .into_iter()
                            .collect(),
                        hold: to,
                        text: format!("{from}/s to {to}/s over {over:?}"),
                    }
                }
                _ => bail!(usage()),
            }
        };
        if spec.hold <= 0.0 {
            bail!("--rate {s:?}: the final rate must be above 0");
        }
        if spec.segments.iter().any(|g| g.from == 0.0 && g.to == 0.0) {
            bail!("--rate {s:?}: a step of rate 0 would never end");
        }
        Ok(spec)
    }

    /// The rate at the start (the warm-up runs at it).
    pub fn start(&self) -> f64 {
        self.segments.first().map_or(self.hold, |g| g.from)
    }

    /// Requests due in the first `t` of the schedule (the tests' check of [`Self::due`]).
    #[cfg(test)]
    pub fn count_by(&self, t: Duration) -> f64 {
        let mut t = t.as_secs_f64();
        let mut n = 0.0;
        for g in &self.segments {
            if t <= g.secs {
                return n + g.count_by(t);
            }
            n += g.count();
            t -= g.secs;
        }
        n + self.hold * t
    }

    /// When request `n` (from 0) is due: the inverse of [`Self::count_by`].
    pub fn due(&self, n: u64) -> Duration {
        let mut n = n as f64;
        let mut t = 0.0;
        for g in &self.segments {
            let c = g.count();
            if n <= c {
                return Duration::from_secs_f64((t + g.due(n)).max(0.0));
            }
            n -= c;
            t += g.secs;
        }
        Duration::from_secs_f64(t + n / self.hold)
    }
}

impl std::fmt::Display for RateSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
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
        assert_eq!(r.start(), 2000.0);
    }

    #[test]
    fn a_ramp_accelerates_then_holds() {
        let r = RateSpec::parse("1000:5000:30s").unwrap();
        assert_eq!(r.start(), 1000.0);
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
    fn steps_hold_each_rate_then_the_last() {
        let r = RateSpec::parse("100,200,400@2s").unwrap();
        assert_eq!(r.start(), 100.0);
        assert!(close(r.due(100), 1.0));
        assert!(close(r.due(200), 2.0));
        assert!(close(r.due(400), 3.0), "200 more at 200/s");
        assert!(close(r.due(600), 4.0));
        assert!(close(r.due(1400), 6.0), "then 400/s: 800 more in 2 s");
        assert!(close(r.due(1800), 7.0));
        assert!((r.count_by(Duration::from_secs(5)) - 1000.0).abs() < 1e-6);
        assert_eq!(r.to_string(), "steps of 2 s at 100, 200, 400/s");
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
            "@1s",
            "1,2@0s",
            "0,5@1s",
            "5,0@1s",
        ] {
            assert!(RateSpec::parse(s).is_err(), "{s}");
        }
    }
}
