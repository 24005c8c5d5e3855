//! The lines a benchmark program prints (`TAG key=value ...` per figure, `TAG-CONFIG`,
//! `TAG-ERROR`, `TAG-SKIP`, `TAG-DONE`), read back out of a guest's serial log.

use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The label of a program that prints none: it runs once per boot.
pub const NO_LABEL: &str = "-";

/// One figure line's `key=value` words.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    pub fields: BTreeMap<String, String>,
}

impl Record {
    pub fn text(&self, key: &str) -> &str {
        self.fields.get(key).map_or("", String::as_str)
    }

    pub fn number(&self, key: &str) -> Option<f64> {
        self.fields.get(key)?.parse().ok()
    }

    /// Whether it has every `(key, value)` of `wanted`.
    pub fn has(&self, wanted: &[(&str, &str)]) -> bool {
        wanted.iter().all(|(key, value)| self.text(key) == *value)
    }

    /// Its fields as a JSON object, numbers as numbers.
    pub fn json(&self) -> Value {
        let fields: serde_json::Map<String, Value> = self
            .fields
            .iter()
            .map(|(key, value)| (key.clone(), value.parse::<f64>().map_or_else(|_| json!(value), |n| json!(n))))
            .collect();
        Value::Object(fields)
    }
}

/// Everything one program printed in one guest boot.
#[derive(Debug, Default, PartialEq)]
pub struct Report {
    pub records: Vec<Record>,
    /// `TAG-ERROR` lines, without the tag.
    pub errors: Vec<String>,
    /// `TAG-SKIP` lines, without the tag.
    pub skips: Vec<String>,
    /// TSC rate per label ([`NO_LABEL`] for a program without), from the config lines.
    pub tsc_hz: BTreeMap<String, f64>,
    /// The labels whose `TAG-DONE` came, once per line.
    pub done: Vec<String>,
    /// Lines of the shell and of the programs it ran that say something failed (`sh: …`,
    /// `role: …`, `execac: …`, `<program>: …`), which explain figures that never came; each
    /// once.
    pub shell_errors: Vec<String>,
}

/// The `key=value` words of `text`.
pub fn fields(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace().filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The label of a config or done line's fields.
fn label(mut fields: BTreeMap<String, String>) -> String {
    fields.remove("label").unwrap_or_else(|| NO_LABEL.to_string())
}

/// Parses the lines of `tag` out of a serial log; text before the tag on a line (a kernel
/// message that got in first) is skipped. `program` names the program, whose own complaints
/// count among the shell errors.
pub fn parse(serial: &str, tag: &str, program: &str) -> Report {
    let mut report = Report::default();
    let own = format!("{program}: ");
    let [error, skip, config, done] = ["ERROR", "SKIP", "CONFIG", "DONE"].map(|kind| format!("{tag}-{kind}"));
    for line in serial.lines() {
        let trimmed = line.trim_end();
        let failure = ["sh: ", "role: ", "execac: ", own.as_str()].iter().any(|prefix| trimmed.starts_with(prefix))
            || trimmed.ends_with(": not found");
        if failure && !report.shell_errors.iter().any(|known| known == trimmed) {
            report.shell_errors.push(trimmed.to_string());
        }
        let Some(position) = trimmed.find(tag) else { continue };
        let Some((found, rest)) = trimmed[position..].split_once(' ') else { continue };
        if found == tag {
            report.records.push(Record { fields: fields(rest) });
        } else if found == error {
            report.errors.push(rest.to_string());
        } else if found == skip {
            report.skips.push(rest.to_string());
        } else if found == config {
            let fields = fields(rest);
            if let Some(hz) = fields.get("tsc_hz").and_then(|hz| hz.parse().ok()) {
                report.tsc_hz.insert(label(fields), hz);
            }
        } else if found == done {
            report.done.push(label(fields(rest)));
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERIAL: &str = "\
[c0 INFO ] TSC 2000 MHz
X-CONFIG tsc_hz=2000000000 os=reef core=0
X figure=stop part=call median_ns=12.5 p5_ns=10
[c1 WARN ] noise X figure=start part=driver median_ns=7
X-SKIP figure=stop reason=not-on-reef
X-ERROR figure=setup target=1: reef_core: Function not implemented (os error 38)
XY figure=other
x: cannot pin
sh: x: not found
sh: x: not found
X-DONE target=1
X-DONE label=loaded
";

    #[test]
    fn lines_of_one_tag() {
        let report = parse(SERIAL, "X", "x");
        assert_eq!(report.records.len(), 2, "noise before the tag is skipped, another tag is not this one");
        assert!(report.records[0].has(&[("figure", "stop"), ("part", "call")]));
        assert!(!report.records[0].has(&[("figure", "stop"), ("part", "driver")]));
        assert_eq!(report.records[1].number("median_ns"), Some(7.0));
        assert_eq!(
            report.records[0].json(),
            json!({ "figure": "stop", "part": "call", "median_ns": 12.5, "p5_ns": 10.0 })
        );
        assert_eq!(report.skips, ["figure=stop reason=not-on-reef"]);
        assert_eq!(report.errors, ["figure=setup target=1: reef_core: Function not implemented (os error 38)"]);
        assert_eq!(report.tsc_hz[NO_LABEL], 2e9);
        assert_eq!(report.done, [NO_LABEL, "loaded"]);
        assert_eq!(report.shell_errors, ["x: cannot pin", "sh: x: not found"], "each once");
        assert_eq!(parse("", "X", "x"), Report::default());
    }
}
