//! Adding the results of the segments of one logical run (`perfkit-load merge A.json B.json …`).
//!
//! Every histogram is in the result (HdrHistogram V2, lossless), so the merged result is exactly the
//! one a single process would have recorded from the same requests. Results of different runs, or
//! the same segment twice, are refused: adding them would make figures no run produced.

use crate::recording::Recorder;
use crate::report::{self, RunResult, Segment};

/// Merge segment results into one result of the logical run.
pub fn merge_results(parts: &[RunResult]) -> Result<(RunResult, Recorder), String> {
    let first = parts.first().ok_or("nothing to merge: give at least one result file")?;
    let mut info = first.info.clone();
    let mut merged = Recorder::default();
    let mut seen: Vec<usize> = Vec::new();
    for (n, r) in parts.iter().enumerate() {
        if r.schema != report::RESULT_SCHEMA {
            return Err(format!("result {} has schema {:?}, expected {:?}", n + 1, r.schema, report::RESULT_SCHEMA));
        }
        if r.info.run_id != info.run_id || r.info.segment.count != info.segment.count {
            return Err(format!(
                "result {} is not part of the same run as result 1 (run {} segment count {} vs run {} count {}): \
                 segments of one run share every setting and --start-at",
                n + 1,
                r.info.run_id,
                r.info.segment.count,
                info.run_id,
                info.segment.count
            ));
        }
        if let Some(dup) = r.info.segment.index.iter().find(|i| seen.contains(i)) {
            return Err(format!("segment {dup}/{} is given twice (result {})", info.segment.count, n + 1));
        }
        seen.extend(&r.info.segment.index);
        merged.merge(&report::recorder_of(r).map_err(|e| format!("result {}: {e}", n + 1))?);
    }
    seen.sort_unstable();
    info.threads = parts.iter().map(|r| r.info.threads).sum();
    info.start_unix_s = parts.iter().map(|r| r.info.start_unix_s).fold(f64::INFINITY, f64::min);
    info.segment = Segment { index: seen, count: info.segment.count };
    let result = report::build_result(&info, &merged);
    Ok((result, merged))
}

/// Read result files (with messages naming the file).
pub fn read_results(paths: &[std::path::PathBuf]) -> Result<Vec<RunResult>, String> {
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            serde_json::from_slice(&text).map_err(|e| format!("{} is not a perfkit-load result: {e}", p.display()))
        })
        .collect()
}
