//! One logical run split over processes (`--segment I/N --start-at T`) and merged
//! (`perfkit-load merge`): the segments send the full schedule between them, and the merged
//! result is exactly what their recorders hold together.

mod common;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{http_server, temp_path, HttpOpts};
use perfkit_load::recording::merge_all;
use perfkit_load::report::{percentiles, RunResult};



fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn read(p: &PathBuf) -> RunResult {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// Run the segments of one run side by side (threads standing in for hosts); their JSON paths.
fn run_segments(url: &str, n: usize, start_in: f64, tag: &str) -> Vec<PathBuf> {
    let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() + start_in;
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let json = temp_path(&format!("{tag}-seg{i}.json"));
            let args = strings(&[
                "-t1", "-c4", "-d1s", "-R", "800", "--segment", &format!("{i}/{n}"),
                "--start-at", &start.to_string(), "--json", json.to_str().unwrap(), url,
            ]);
            std::thread::spawn(move || {
                let (code, out, err) = common::cli(&args);
                assert_eq!(code, 0, "{out}{err}");
                json
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn two_segments_send_the_schedule_of_one_run_and_merge_losslessly() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let url = server.url("http", "/");
    let parts = run_segments(&url, 2, 0.5, "pair");
    assert_eq!(server.accepted(), 4, "each segment opened only its own connections");
    let (a, b) = (read(&parts[0]), read(&parts[1]));
    assert_eq!(a.info.run_id, b.info.run_id);
    assert_eq!((a.intended, b.intended), (400, 400), "connections 0,2 and 1,3 each carry half the schedule");

    let merged_path = temp_path("pair-merged.json");
    let mut args = strings(&["merge", "--json", merged_path.to_str().unwrap()]);
    args.extend(parts.iter().map(|p| p.to_str().unwrap().to_string()));
    let (code, out, err) = common::cli(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("segments [0, 1] of 2") && out.contains("Requests/sec:"), "{out}");
    let m = read(&merged_path);
    let schema: serde_json::Value = serde_json::from_str(include_str!("../result.schema.json")).unwrap();
    let merged_json: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged_path).unwrap()).unwrap();
    let problems: Vec<String> =
        jsonschema::validator_for(&schema).unwrap().iter_errors(&merged_json).map(|e| e.to_string()).collect();
    assert!(problems.is_empty(), "the merged result follows the schema: {problems:?}");
    assert_eq!(m.intended, 800, "the full schedule of -R 800 -d 1s");
    assert_eq!(m.intended, m.outcomes.values().sum::<u64>());
    assert_eq!(m.info.segment.index, vec![0, 1]);
    assert_eq!(m.info.threads, 2);
    for (name, n) in &m.outcomes {
        assert_eq!(*n, a.outcomes[name] + b.outcomes[name], "{name}");
    }
    // Same histograms as adding the two recorders directly: same percentiles, to the microsecond.
    let direct = merge_all([
        &perfkit_load::report::recorder_of(&a).unwrap(),
        &perfkit_load::report::recorder_of(&b).unwrap(),
    ]);
    assert_eq!(m.latency.corrected.percentiles_us, percentiles(&direct.total.corrected));
    assert_eq!(m.latency.uncorrected.percentiles_us, percentiles(&direct.total.uncorrected));
    assert_eq!(m.intervals.len(), a.intervals.len().max(b.intervals.len()));
    assert_eq!(m.intervals[0].intended, a.intervals[0].intended + b.intervals[0].intended);
    let lateness = m.send_lateness.as_ref().unwrap().count;
    assert_eq!(lateness, a.send_lateness.as_ref().unwrap().count + b.send_lateness.as_ref().unwrap().count);
}

#[test]
fn merge_refuses_parts_of_different_runs_and_repeated_segments() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let url = server.url("http", "/");
    let one = run_segments(&url, 2, 0.3, "one");
    let other = run_segments(&url, 2, 0.3, "other");
    let p = |x: &PathBuf| x.to_str().unwrap().to_string();
    let (code, _, err) = common::cli(&[ "merge".into(), p(&one[0]), p(&other[1])]);
    assert_eq!(code, 2);
    assert!(err.contains("not part of the same run"), "{err}");
    let (code, _, err) = common::cli(&["merge".into(), p(&one[0]), p(&one[0])]);
    assert_eq!(code, 2);
    assert!(err.contains("given twice"), "{err}");
    let junk = temp_path("junk.json");
    std::fs::write(&junk, "{}").unwrap();
    let (code, _, err) = common::cli(&["merge".into(), p(&one[0]), p(&junk)]);
    assert_eq!(code, 2);
    assert!(err.contains("is not a perfkit-load result"), "{err}");
    // Thresholds on the merged result decide the exit status too.
    let (code, out, _) = common::cli(&["merge".into(), "--threshold".into(), "p99<1us".into(), p(&one[0]), p(&one[1])]);
    assert_eq!(code, 3, "{out}");
}

#[test]
fn the_interval_log_holds_every_recorded_latency() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let json = temp_path("hlog.json");
    let log = temp_path("run.hlog");
    let (code, out, err) = common::cli(&strings(&[
        "-t1", "-c2", "-d2s", "-R", "300", "--interval", "500ms", "--json", json.to_str().unwrap(),
        "--hdr-log", log.to_str().unwrap(), &server.url("http", "/"),
    ]));
    assert_eq!(code, 0, "{out}{err}");
    let r = read(&json);
    let text = std::fs::read(&log).unwrap();
    let (mut total, mut n, mut max) = (0, 0, 0);
    for item in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&text) {
        if let Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(h)) = item {
            let bytes = base64_decode(h.encoded_histogram());
            let hist: hdrhistogram::Histogram<u64> =
                hdrhistogram::serialization::Deserializer::new().deserialize(&mut bytes.as_slice()).unwrap();
            assert_eq!(h.duration(), Duration::from_millis(500));
            total += hist.len();
            max = max.max(hist.max());
            n += 1;
        }
    }
    assert_eq!(n, 4, "2 s in 500 ms intervals");
    assert_eq!(total, r.latency.corrected.count);
    // The values too, not only the counts: the slowest interval holds the run's maximum.
    let want = r.latency.corrected.max_us;
    assert!(max.abs_diff(want) * 1000 <= want, "interval max {max} vs run max {want}");
    let p99s: Vec<u64> = r.intervals.iter().map(|i| i.percentiles_us.p99).collect();
    assert!(p99s.iter().all(|p| *p >= r.latency.corrected.min_us), "{p99s:?}");
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}
