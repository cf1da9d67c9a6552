//! perfkit-metrics-conformance: runs an observation script (stdin) and writes the exposition (stdout).
//!
//!     perfkit-metrics-conformance [--openmetrics] < observations.tsv

use std::io::{Read, Write};
use std::process::ExitCode;

use perfkit_metrics::{conformance, Format};

const USAGE: &str = "usage: perfkit-metrics-conformance [--openmetrics] < SCRIPT\n\
  reads an observation script (perfkit/metrics/SPEC.md) on stdin and writes the exposition on stdout:\n\
  Prometheus text format 0.0.4, or OpenMetrics 1.0.0 with --openmetrics\n";

fn main() -> ExitCode {
    let mut format = Format::Text;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--openmetrics" => format = Format::OpenMetrics,
            "-h" | "--help" => {
                print!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprint!("perfkit-metrics-conformance: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let mut script = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut script) {
        eprintln!("perfkit-metrics-conformance: cannot read the script on stdin: {e}");
        return ExitCode::FAILURE;
    }
    let registry = match conformance::run(&script) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("perfkit-metrics-conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = registry.render(format);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(out.as_bytes()).and_then(|_| stdout.flush()) {
        eprintln!("perfkit-metrics-conformance: cannot write the exposition: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
