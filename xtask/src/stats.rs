//! Summary statistics for benchmark samples.

/// Median, percentiles and extremes of a sample set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub min: f64,
    pub p5: f64,
    pub median: f64,
    pub p95: f64,
    pub max: f64,
}

/// The `p`-th percentile (0..=100) of sorted samples, nearest rank.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Summarises `samples`; `None` when there are none.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = if sorted.len() % 2 == 1 {
        sorted[sorted.len() / 2]
    } else {
        (sorted[sorted.len() / 2 - 1] + sorted[sorted.len() / 2]) / 2.0
    };
    Some(Summary {
        count: sorted.len(),
        min: sorted[0],
        p5: percentile(&sorted, 5.0),
        median,
        p95: percentile(&sorted, 95.0),
        max: sorted[sorted.len() - 1],
    })
}

impl Summary {
    /// As a JSON object.
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "count": self.count, "min": self.min, "p5": self.p5,
            "median": self.median, "p95": self.p95, "max": self.max,
        })
    }
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
