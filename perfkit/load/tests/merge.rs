//! Merging per-thread histograms gives the same percentiles as one histogram of everything, and
//! the encoded form in the JSON output is lossless.

mod common;

use perfkit_load::recording::{merge_all, new_histogram, Outcome, Recorder};
use perfkit_load::report::{decode_histogram, encode_histogram, percentiles};

/// A small deterministic generator (xorshift), with a long-tailed latency shape.
fn values(n: usize, seed: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            // 50 us .. ~5 s, heavy tail
            (50.0 / (1.0 - u).powf(0.7)).min(5e6) as u64
        })
        .collect()
}

#[test]
fn merged_per_thread_equals_single_histogram() {
    let _serial = common::serial();
    let vals = values(200_000, 0x9E3779B97F4A7C15);
    let mut one = Recorder::default();
    let mut threads: Vec<Recorder> = (0..4).map(|_| Recorder::default()).collect();
    for (i, v) in vals.iter().enumerate() {
        one.record_latency_us(Outcome::Status2xx, *v, v / 2);
        threads[i % 4].record_latency_us(Outcome::Status2xx, *v, v / 2);
    }
    let merged = merge_all(threads.iter());
    assert_eq!(merged.total.corrected.len(), one.total.corrected.len());
    assert_eq!(merged.total.count(Outcome::Status2xx), 200_000);
    for q in [0.0, 0.1, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 0.99999, 1.0] {
        assert_eq!(merged.total.corrected.value_at_quantile(q), one.total.corrected.value_at_quantile(q), "q={q}");
        assert_eq!(merged.total.uncorrected.value_at_quantile(q), one.total.uncorrected.value_at_quantile(q), "q={q}");
    }
    assert_eq!(merged.total.corrected.min(), one.total.corrected.min());
    assert_eq!(merged.total.corrected.max(), one.total.corrected.max());
    assert!((merged.total.corrected.mean() - one.total.corrected.mean()).abs() < 1e-9);
    assert_eq!(merged.total.corrected, one.total.corrected);
    // And the histogram really holds the values to 3 significant digits.
    let mut sorted = vals.clone();
    sorted.sort();
    let exact = sorted[(0.99 * sorted.len() as f64).ceil() as usize - 1];
    let got = one.total.corrected.value_at_quantile(0.99);
    assert!((got as f64 - exact as f64).abs() / exact as f64 <= 0.001, "p99 {got} vs exact {exact}");
}

#[test]
fn encoded_histograms_merge_losslessly() {
    let _serial = common::serial();
    // Two "hosts" encode their histograms; decoding and adding equals one histogram of both.
    let (a, b) = (values(50_000, 1), values(50_000, 2));
    let mut ha = new_histogram();
    let mut hb = new_histogram();
    let mut all = new_histogram();
    for v in &a {
        ha.record(*v).unwrap();
        all.record(*v).unwrap();
    }
    for v in &b {
        hb.record(*v).unwrap();
        all.record(*v).unwrap();
    }
    let mut sum = decode_histogram(&encode_histogram(&ha)).unwrap();
    sum.add(decode_histogram(&encode_histogram(&hb)).unwrap()).unwrap();
    assert_eq!(sum.len(), all.len());
    assert_eq!(percentiles(&sum), percentiles(&all));
    assert!(decode_histogram("not base64!").is_err());
    assert!(decode_histogram("aGVsbG8=").is_err());
}

#[test]
fn engine_threads_merge_to_the_reported_histogram() {
    let _serial = common::serial();
    let server = common::http_server(Default::default());
    let cfg = common::http_config(&server.url("http", "/"), Some(1000.0), 2, 4, 1.0);
    let out = perfkit_load::run(&cfg).unwrap();
    assert_eq!(out.per_thread.len(), 2);
    assert!(out.per_thread.iter().all(|r| r.total.responses() > 0), "both threads worked");
    let merged = merge_all(out.per_thread.iter());
    assert_eq!(merged.total.corrected, out.merged.total.corrected);
    let decoded = decode_histogram(&out.result.latency.corrected.hdr).unwrap();
    assert_eq!(decoded, out.merged.total.corrected);
    assert_eq!(percentiles(&decoded), out.result.latency.corrected.percentiles_us);
    let decoded_u = decode_histogram(&out.result.latency.uncorrected.hdr).unwrap();
    assert_eq!(decoded_u.len(), out.result.requests + out.result.outcomes["unfinished"]);
}
