/**
 * The one bucket layout of every perfkit latency histogram (SPEC.md, "Buckets"): 18 bounds from 25 µs to
 * 10 s, then `+Inf`, and the `le` strings exactly as prometheus-client (Python) writes them, so that series of
 * every language aggregate with `sum by (le)`.
 *
 * The bounds exist twice: in nanoseconds for the integer fast path (`bucketOfNs`, what a service that reads a
 * monotonic clock records), and in seconds, as the same IEEE doubles as Python's literals, for values given in
 * seconds (`bucketOfSeconds`): a value exactly on a bound lands in the same bucket as in Python (`le` is
 * inclusive).
 */
module perfkit_metrics.buckets;

@safe pure nothrow @nogc:

/// Finite bounds of the layout.
enum size_t boundCount = 18;
/// Buckets per histogram series: the finite bounds, then `+Inf`.
enum size_t bucketCount = boundCount + 1;

/// The bounds in seconds (the values Python's `LATENCY_BUCKETS` holds).
immutable double[boundCount] latencyBounds = [
    0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The bounds in nanoseconds.
immutable ulong[boundCount] latencyBoundsNs = [
    25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000,
    50_000_000, 100_000_000, 250_000_000, 500_000_000, 1_000_000_000, 2_500_000_000, 5_000_000_000,
    10_000_000_000,
];

/// The `le` label value of each bucket, `+Inf` last.
immutable string[bucketCount] leLabels = [
    "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf",
];

/// The bucket of a duration in nanoseconds: the first whose bound is >= it (`boundCount` is `+Inf`).
/// Latencies are mostly short, so a scan from the low end stops after a comparison or two.
pragma(inline, true)
size_t bucketOfNs(ulong ns)
{
    size_t b = 0;
    while (b < boundCount && ns > latencyBoundsNs[b])
        ++b;
    return b;
}

/// The bucket of a duration in seconds, compared as doubles like Python does (NaN lands in the first
/// bucket, as with Python's `bisect_left`).
size_t bucketOfSeconds(double seconds)
{
    size_t b = 0;
    while (b < boundCount && seconds > latencyBounds[b])
        ++b;
    return b;
}

/// Seconds to whole nanoseconds (rounded); negative and NaN give 0, absurdly large values saturate.
ulong secondsToNs(double seconds)
{
    if (!(seconds > 0))
        return 0;
    if (seconds >= 1.8e10) // ulong.max ns is about 584 years
        return 18_000_000_000_000_000_000UL;
    return cast(ulong)(seconds * 1e9 + 0.5);
}

unittest
{
    static assert(latencyBounds.length == latencyBoundsNs.length);
    foreach (i; 0 .. boundCount)
    {
        assert(secondsToNs(latencyBounds[i]) == latencyBoundsNs[i]);
        // a value on a bound is in that bound's bucket, either way it is given
        assert(bucketOfNs(latencyBoundsNs[i]) == i);
        assert(bucketOfSeconds(latencyBounds[i]) == i);
        assert(bucketOfNs(latencyBoundsNs[i] + 1) == i + 1);
    }
    assert(bucketOfNs(0) == 0 && bucketOfSeconds(0) == 0);
    assert(bucketOfSeconds(0.0000251) == 1);
    assert(bucketOfSeconds(10.000001) == boundCount && bucketOfNs(3_600_000_000_000) == boundCount);
    assert(bucketOfSeconds(double.nan) == 0 && bucketOfSeconds(double.infinity) == boundCount);
    assert(secondsToNs(-1) == 0 && secondsToNs(double.nan) == 0 && secondsToNs(0.0000031) == 3_100);
    assert(secondsToNs(double.infinity) == 18_000_000_000_000_000_000UL);
    assert(leLabels[14] == "1.0" && leLabels[$ - 1] == "+Inf");
}
