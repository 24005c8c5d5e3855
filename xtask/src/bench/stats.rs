//! Summary statistics for benchmark samples: the `samples` crate's definitions (the ones the
//! kernel and the Linux peer use), over real numbers, and as JSON.

pub use samples::Summary;

/// Summarises `values`; `None` when there are none.
pub fn summarize(values: &[f64]) -> Option<Summary<f64>> {
    samples::summarize(&mut values.to_vec())
}

/// `summary` as a JSON object.
pub fn to_json(summary: &Summary<f64>) -> serde_json::Value {
    serde_json::json!({
        "count": summary.count, "min": summary.min, "p5": summary.p5,
        "median": summary.median, "p95": summary.p95, "max": summary.max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentiles() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 3.0, 5.0));
        let even = summarize(&[1.0, 2.0, 3.0, 10.0]).unwrap();
        assert_eq!(even.median, 2.5);
        let many: Vec<f64> = (1..=101).map(f64::from).collect();
        let s = summarize(&many).unwrap();
        assert_eq!((s.p5, s.p95), (6.0, 96.0));
        assert!(summarize(&[]).is_none());
    }
}
