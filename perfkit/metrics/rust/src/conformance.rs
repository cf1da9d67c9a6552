//! The observation-script interpreter of the conformance driver (`../SPEC.md`, "Conformance script").
//!
//! One operation per line, fields separated by one TAB, `#` lines and empty lines ignored, `\n` in a field is a
//! newline:
//!
//! ```text
//! server   SERVICE  ROUTE  METHOD  STATUS  SECONDS
//! hot      SERVICE  HOTPATH  SECONDS                      (recorded, not sampled)
//! client   SERVICE  METHOD  HOST  STATUS  SECONDS
//! stage    SERVICE  STAGE  SECONDS
//! counter  NAME  HELP  LABELNAMES  LABELVALUES  AMOUNT    (names and values comma-separated, may be empty)
//! gauge    NAME  HELP  LABELNAMES  LABELVALUES  VALUE
//! histogram NAME HELP  LABELNAMES  LABELVALUES  SECONDS
//! ```

use crate::registry::Registry;
use crate::standard::{HotPaths, HttpClientMetrics, HttpServerMetrics, Stage};

/// A malformed line: its number (from 1) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ScriptError {}

/// Runs a whole script into a new registry; the first malformed line stops it.
pub fn run(script: &str) -> Result<Registry, ScriptError> {
    let registry = Registry::new();
    run_into(&registry, script)?;
    Ok(registry)
}

/// Runs a script into `registry`.
pub fn run_into(registry: &Registry, script: &str) -> Result<(), ScriptError> {
    for (i, line) in script.split('\n').enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        apply(registry, line).map_err(|message| ScriptError { line: i + 1, message })?;
    }
    Ok(())
}

fn unescape(field: &str) -> String {
    field.replace("\\n", "\n")
}

fn seconds(what: &str, v: &str) -> Result<f64, String> {
    v.trim().parse::<f64>().map_err(|_| format!("{what} {v:?} is not a number"))
}

fn status(v: &str) -> Result<u32, String> {
    let n: i64 = v.trim().parse().map_err(|_| format!("STATUS {v:?} is not an integer"))?;
    // Out of u32's range: still a status that is no class ("other").
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

fn list(v: &str) -> Vec<&str> {
    if v.is_empty() {
        Vec::new()
    } else {
        v.split(',').collect()
    }
}

fn apply(registry: &Registry, line: &str) -> Result<(), String> {
    let raw: Vec<&str> = line.split('\t').collect();
    let op = raw[0];
    let fields: Vec<String> = raw[1..].iter().map(|f| unescape(f)).collect();
    let want = match op {
        "server" | "client" => 5,
        "hot" | "stage" => 3,
        "counter" | "gauge" | "histogram" => 5,
        _ => {
            return Err(format!(
                "unknown operation {op:?} (server, hot, client, stage, counter, gauge, histogram; fields are separated by one TAB)"
            ))
        }
    };
    if fields.len() != want {
        return Err(format!("{op} takes {want} TAB-separated fields after the operation, got {}", fields.len()));
    }
    let f: Vec<&str> = fields.iter().map(String::as_str).collect();
    let err = |e: crate::Error| e.0;
    match op {
        "server" => {
            let (st, secs) = (status(f[3])?, seconds("SECONDS", f[4])?);
            HttpServerMetrics::new(registry, f[0]).map_err(err)?.observe(f[1], f[2], st, secs);
        }
        "hot" => {
            let secs = seconds("SECONDS", f[2])?;
            HotPaths::new(registry, f[0]).map_err(err)?.path(f[1]).record(secs);
        }
        "client" => {
            let (st, secs) = (status(f[3])?, seconds("SECONDS", f[4])?);
            HttpClientMetrics::new(registry, f[0]).map_err(err)?.observe(f[1], f[2], st, secs);
        }
        "stage" => {
            let stage = Stage::from_name(f[1]).ok_or_else(|| {
                format!("STAGE {:?} is not one of pool_wait, connect, tls, ttfb, transfer, decode", f[1])
            })?;
            let secs = seconds("SECONDS", f[2])?;
            HttpClientMetrics::new(registry, f[0]).map_err(err)?.stage(stage, secs);
        }
        _ => {
            let (name, help, names, values) = (f[0], f[1], list(f[2]), list(f[3]));
            if names.len() != values.len() {
                return Err(format!("{} label names but {} label values", names.len(), values.len()));
            }
            match op {
                "counter" => {
                    let amount = seconds("AMOUNT", f[4])?;
                    registry.counter(name, help, &names).map_err(err)?.inc_by(&values, amount).map_err(err)?;
                }
                "gauge" => {
                    let value = seconds("VALUE", f[4])?;
                    registry.gauge(name, help, &names).map_err(err)?.set(&values, value).map_err(err)?;
                }
                _ => {
                    let secs = seconds("SECONDS", f[4])?;
                    registry.histogram(name, help, &names).map_err(err)?.observe(&values, secs).map_err(err)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    #[test]
    fn malformed_lines_name_their_number() {
        let cases = [
            ("server\tsvc\t/\tGET\t200", "line 1: server takes 5"),
            ("# c\n\nserver\tsvc\t/\tGET\tok\t0.1", "line 3: STATUS \"ok\""),
            ("hot\tsvc\tparse\tfast", "SECONDS \"fast\" is not a number"),
            ("stage\tcli\tdns\t0.1", "STAGE \"dns\""),
            ("server svc / GET 200 0.1", "unknown operation"),
            ("counter\tc\tC\ta,b\tx\t1", "2 label names but 1 label values"),
            ("counter\tc\tC\t\t\t-1", "only goes up"),
            ("gauge\tbad name\tB\t\t\t1", "line 1:"),
            ("counter\tc\tC\t\t\t1\ngauge\tc_total\tC\t\t\t1", "line 2: metric family c_total would write"),
        ];
        for (script, want) in cases {
            let e = run(script).err().unwrap_or_else(|| panic!("{script:?} passed"));
            assert!(e.to_string().contains(want), "{script:?}: {e}");
        }
    }

    #[test]
    fn newlines_in_fields_and_help_of_the_first_use() {
        let r = run("server\tsvc\tline\\none\tGET\t200\t0.1\ngauge\tg\tFirst\\nhelp\t\t\t1\ngauge\tg\tSecond\t\t\t2\n").unwrap();
        let text = r.render(Format::Text);
        assert!(text.contains(r#"route="line\none""#), "{text}");
        assert!(text.contains("# HELP g First\\nhelp\n# TYPE g gauge\ng 2.0\n"), "{text}");
    }
}
