//! Durations (`250us`, `50ms`, `1.5s`, `2m`) and ratios (`0.1%`, `0.001`) on the command line.

use std::time::Duration;

use anyhow::{Context, Result, bail};

pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .with_context(|| format!("duration {s:?}: e.g. 50ms, 1.5s, 2m"))?;
    let secs = match unit {
        "us" | "µs" => n / 1e6,
        "ms" => n / 1e3,
        "s" | "" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => bail!("duration {s:?}: unknown unit {other:?} (us, ms, s, m, h)"),
    };
    if !secs.is_finite() || secs < 0.0 {
        bail!("duration {s:?}: must not be negative");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A ratio: `0.1%` is 0.001; a bare number is the ratio itself.
pub fn parse_ratio(s: &str) -> Result<f64> {
    let s = s.trim();
    let r = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => s.parse::<f64>(),
    }
    .with_context(|| format!("ratio {s:?}: e.g. 0.1% or 0.001"))?;
    if !(0.0..=1.0).contains(&r) {
        bail!("ratio {s:?}: between 0 and 100%");
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("5 parsecs").is_err());
        assert!((parse_ratio("0.1%").unwrap() - 0.001).abs() < 1e-12);
        assert!((parse_ratio("0.02").unwrap() - 0.02).abs() < 1e-12);
        assert!(parse_ratio("120%").is_err());
    }
}
