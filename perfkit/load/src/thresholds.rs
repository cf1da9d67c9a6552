//! Pass/fail thresholds (`--threshold`), k6-style: `p99<5ms`, `errors<0.1%`, `rate>=9900`, `rate_held`.
//!
//! Latency metrics (`p50 p75 p90 p99 p99.9 p99.99 max mean` of the corrected histogram, and
//! `lateness_p99`, the engine's send lateness) take a duration with its unit. Count metrics
//! (`errors timeouts unfinished failed non2xx`) take a number, or a percentage of the intended
//! requests. `rate` is the achieved req/s. `rate_held` alone passes when the run held its schedule.

use crate::report::{RunResult, ThresholdResult};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

/// How a threshold's value reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unit {
    Micros,
    Ratio,
    Plain,
}

/// A parsed `--threshold`.
#[derive(Clone, Debug)]
pub struct Threshold {
    pub expr: String,
    metric: String,
    check: Option<(Op, f64)>,
    unit: Unit,
}

const LATENCY: [&str; 9] = ["p50", "p75", "p90", "p99", "p99.9", "p99.99", "max", "mean", "lateness_p99"];
const COUNTS: [&str; 5] = ["errors", "timeouts", "unfinished", "failed", "non2xx"];

fn split(expr: &str) -> Option<(&str, Op, &str)> {
    for (text, op) in [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)] {
        if let Some((m, v)) = expr.split_once(text) {
            return Some((m.trim(), op, v.trim()));
        }
    }
    None
}

/// Parse one threshold expression, with a message naming what is wrong.
pub fn parse(expr: &str) -> Result<Threshold, String> {
    let e = expr.trim();
    let bad = |why: String| format!("invalid --threshold {expr:?}: {why}");
    if e == "rate_held" {
        return Ok(Threshold { expr: e.into(), metric: e.into(), check: None, unit: Unit::Plain });
    }
    let (metric, op, value) = split(e).ok_or_else(|| bad("use METRIC<VALUE, e.g. p99<5ms, errors<0.1%, rate>=990, or rate_held".into()))?;
    let (v, unit) = if LATENCY.contains(&metric) {
        if value.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.').is_empty() {
            return Err(bad(format!("{metric} needs a unit (us, ms, s), e.g. {metric}<5ms")));
        }
        let d = crate::cli::parse_duration(value).map_err(bad)?;
        (d.as_secs_f64() * 1e6, Unit::Micros)
    } else if COUNTS.contains(&metric) {
        match value.strip_suffix('%') {
            Some(p) => (p.trim().parse::<f64>().map_err(|_| bad(format!("{p:?} is not a number")))? / 100.0, Unit::Ratio),
            None => (value.parse::<f64>().map_err(|_| bad(format!("{value:?} is not a number")))?, Unit::Plain),
        }
    } else if metric == "rate" {
        (value.parse::<f64>().map_err(|_| bad(format!("{value:?} is not a number")))?, Unit::Plain)
    } else {
        return Err(bad(format!(
            "unknown metric {metric:?} (latency: {}; counts: {}; rate; rate_held)",
            LATENCY.join(" "),
            COUNTS.join(" ")
        )));
    };
    if !v.is_finite() || v < 0.0 {
        return Err(bad("the value must be a non-negative number".into()));
    }
    Ok(Threshold { expr: e.into(), metric: metric.into(), check: Some((op, v)), unit })
}

/// The unit a threshold expression's value is measured in (for printing).
pub fn unit_of(expr: &str) -> Unit {
    parse(expr).map(|t| t.unit).unwrap_or(Unit::Plain)
}

fn measured(t: &Threshold, r: &RunResult) -> f64 {
    let p = &r.latency.corrected.percentiles_us;
    let count = |n: u64| if t.unit == Unit::Ratio { n as f64 / r.intended.max(1) as f64 } else { n as f64 };
    match t.metric.as_str() {
        "p50" => p.p50 as f64,
        "p75" => p.p75 as f64,
        "p90" => p.p90 as f64,
        "p99" => p.p99 as f64,
        "p99.9" => p.p99_9 as f64,
        "p99.99" => p.p99_99 as f64,
        "max" => p.max as f64,
        "mean" => r.latency.corrected.mean_us,
        "lateness_p99" => r.send_lateness.as_ref().map_or(0.0, |l| l.percentiles_us.p99 as f64),
        "errors" => count(r.errors),
        "timeouts" => count(r.outcomes["timeout"]),
        "unfinished" => count(r.outcomes["unfinished"]),
        "failed" => count(r.failed),
        "non2xx" => count(r.requests - r.outcomes["2xx"] - r.outcomes["rpc_ok"]),
        "rate" => r.achieved_rate,
        "rate_held" => f64::from(u8::from(r.rate_held.unwrap_or(false))),
        other => unreachable!("parse() accepts no metric {other}"),
    }
}

/// Check every threshold against a result.
pub fn evaluate(thresholds: &[Threshold], r: &RunResult) -> Vec<ThresholdResult> {
    thresholds
        .iter()
        .map(|t| {
            let value = measured(t, r);
            let passed = match t.check {
                None => value == 1.0,
                Some((Op::Lt, limit)) => value < limit,
                Some((Op::Le, limit)) => value <= limit,
                Some((Op::Gt, limit)) => value > limit,
                Some((Op::Ge, limit)) => value >= limit,
            };
            ThresholdResult { expr: t.expr.clone(), value, passed }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_latency_counts_rate_and_rate_held() {
        let t = parse("p99<5ms").unwrap();
        assert_eq!(t.check, Some((Op::Lt, 5000.0)));
        assert_eq!(parse("errors<0.1%").unwrap().check, Some((Op::Lt, 0.001)));
        assert_eq!(parse("errors<=3").unwrap().unit, Unit::Plain);
        assert_eq!(parse(" rate >= 990 ").unwrap().check, Some((Op::Ge, 990.0)));
        assert!(parse("rate_held").unwrap().check.is_none());
        assert_eq!(parse("p99.9<1s").unwrap().check, Some((Op::Lt, 1e6)));
    }

    #[test]
    fn refuses_bad_expressions_with_a_reason() {
        for (bad, why) in [
            ("p99", "use METRIC<VALUE"),
            ("p99<5", "needs a unit"),
            ("p42<5ms", "unknown metric"),
            ("errors<x%", "not a number"),
            ("rate<-1", "non-negative"),
            ("p99<5parsecs", "invalid duration unit"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
