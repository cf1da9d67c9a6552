/**
 * The exposition: Prometheus text format 0.0.4, or OpenMetrics 1.0.0 when the scraper's `Accept` names
 * `application/openmetrics-text` (SPEC.md, "Exposition"), written into any sink with `put(const(char)[])`
 * by summing the shards at scrape time. With a `@nogc nothrow` sink, writing is `@nogc nothrow` too, so a
 * service can answer `/metrics` from its request path without touching the GC.
 *
 *     const format = negotiate(acceptHeaderValue);
 *     writeExposition(registry, sink, format);   // body
 *     contentType(format);                       // the Content-Type to send with it
 *
 * Written by hand: this machine reaches no DUB registry, so no D Prometheus package could be used, and the
 * format is small. Series come in registration order; a histogram writes its cumulative buckets, then
 * `_count` (the sum of the buckets read, so it always equals the `+Inf` bucket) and `_sum` (exact nanoseconds
 * written as decimal seconds). Integral values are written without a fraction (`3`, which parses as `3.0`).
 */
module perfkit_metrics.exposition;

import perfkit_metrics.buckets;
import perfkit_metrics.registry;

enum Format : ubyte { text, openMetrics }

enum string textContentType = "text/plain; version=0.0.4; charset=utf-8";
enum string openMetricsContentType = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// OpenMetrics when one of the media ranges of an `Accept` header value is `application/openmetrics-text`
/// (whatever its parameters), else the text format.
Format negotiate(scope const(char)[] accept) @safe pure nothrow @nogc
{
    enum want = "application/openmetrics-text";
    size_t i = 0;
    while (i <= accept.length)
    {
        size_t end = i;
        while (end < accept.length && accept[end] != ',')
            ++end;
        auto range = accept[i .. end];
        foreach (j, c; range)
            if (c == ';')
            {
                range = range[0 .. j];
                break;
            }
        while (range.length && (range[0] == ' ' || range[0] == '\t'))
            range = range[1 .. $];
        while (range.length && (range[$ - 1] == ' ' || range[$ - 1] == '\t'))
            range = range[0 .. $ - 1];
        if (range.length == want.length)
        {
            bool same = true;
            foreach (j, c; range)
                same = same && (c | 0x20) == (want[j] | 0x20);
            if (same)
                return Format.openMetrics;
        }
        i = end + 1;
    }
    return Format.text;
}

string contentType(Format format) @safe pure nothrow @nogc
{
    return format == Format.openMetrics ? openMetricsContentType : textContentType;
}

/// Write the whole exposition of `reg` (frozen) into `sink`.
void writeExposition(Sink)(const Registry reg, ref Sink sink, Format format)
{
    const om = format == Format.openMetrics;
    foreach (f; reg.families)
    {
        // text format: a counter's HELP and TYPE name its sample (x_total); OpenMetrics: the family (x)
        const totalInHeader = f.kind == Kind.counter && !om;
        sink.put("# HELP ");
        sink.put(f.name);
        if (totalInHeader)
            sink.put("_total");
        sink.put(" ");
        sink.put(om ? f.helpOpenMetrics : f.helpText);
        sink.put("\n# TYPE ");
        sink.put(f.name);
        if (totalInHeader)
            sink.put("_total");
        final switch (f.kind)
        {
        case Kind.counter: sink.put(" counter\n"); break;
        case Kind.gauge: sink.put(" gauge\n"); break;
        case Kind.histogram: sink.put(" histogram\n"); break;
        }
        foreach (ref s; f.series)
        {
            final switch (f.kind)
            {
            case Kind.counter:
                const v = reg.sumD(s.slot);
                if (v == 0 && !s.showEmpty)
                    continue;
                sample(sink, f.name, "_total", s.labels);
                putDouble(sink, v);
                sink.put("\n");
                break;
            case Kind.gauge:
                const v = reg.sumD(s.slot);
                if (v == 0 && !s.showEmpty)
                    continue;
                sample(sink, f.name, "", s.labels);
                putDouble(sink, v);
                sink.put("\n");
                break;
            case Kind.histogram:
                ulong[bucketCount] counts;
                ulong total = 0;
                foreach (b; 0 .. bucketCount)
                {
                    counts[b] = reg.sumU(s.slot + b);
                    total += counts[b];
                }
                if (total == 0 && !s.showEmpty)
                    continue;
                ulong cumulative = 0;
                foreach (b; 0 .. bucketCount)
                {
                    cumulative += counts[b];
                    sink.put(f.name);
                    sink.put("_bucket{");
                    if (s.labels.length)
                    {
                        sink.put(s.labels);
                        sink.put(",");
                    }
                    sink.put(`le="`);
                    sink.put(leLabels[b]);
                    sink.put(`"} `);
                    putUint(sink, cumulative);
                    sink.put("\n");
                }
                sample(sink, f.name, "_count", s.labels);
                putUint(sink, total);
                sink.put("\n");
                sample(sink, f.name, "_sum", s.labels);
                putSecondsOfNs(sink, reg.sumU(s.slot + histogramSumSlot));
                sink.put("\n");
                break;
            }
        }
    }
    if (om)
        sink.put("# EOF\n");
}

/// `name suffix{labels} ` (no braces without labels).
private void sample(Sink)(ref Sink sink, string name, string suffix, string labels)
{
    sink.put(name);
    if (suffix.length)
        sink.put(suffix);
    if (labels.length)
    {
        sink.put("{");
        sink.put(labels);
        sink.put("} ");
    }
    else
        sink.put(" ");
}

/// Decimal digits of `v`.
void putUint(Sink)(ref Sink sink, ulong v)
{
    char[20] tmp;
    size_t i = tmp.length;
    do
    {
        tmp[--i] = cast(char)('0' + v % 10);
        v /= 10;
    }
    while (v);
    sink.put(tmp[i .. $]);
}

/// Nanoseconds as exact decimal seconds: `0`, `0.000031`, `20.00003`.
void putSecondsOfNs(Sink)(ref Sink sink, ulong ns)
{
    putUint(sink, ns / 1_000_000_000);
    ulong frac = ns % 1_000_000_000;
    if (frac == 0)
        return;
    char[10] digits = ".000000000";
    foreach_reverse (i; 1 .. 10)
    {
        digits[i] = cast(char)('0' + frac % 10);
        frac /= 10;
    }
    size_t end = digits.length;
    while (digits[end - 1] == '0')
        --end;
    sink.put(digits[0 .. end]);
}

/// A double in the shortest of 15 or 17 significant digits that reads back exactly; `+Inf`, `-Inf`, `NaN`.
void putDouble(Sink)(ref Sink sink, double v)
{
    import core.stdc.stdio : snprintf;
    import core.stdc.stdlib : strtod;

    if (v != v)
        return sink.put("NaN");
    if (v == double.infinity)
        return sink.put("+Inf");
    if (v == -double.infinity)
        return sink.put("-Inf");
    char[40] buf;
    int n = formatG(buf, 15, v);
    if (strtodAt(buf) != v)
        n = formatG(buf, 17, v);
    sink.put(buf[0 .. n]);
}

private int formatG(ref char[40] buf, int precision, double v) @trusted @nogc nothrow
{
    import core.stdc.stdio : snprintf;

    const n = snprintf(buf.ptr, buf.length, "%.*g", precision, v);
    return n < 0 ? 0 : (n >= buf.length ? cast(int) buf.length - 1 : n);
}

private double strtodAt(ref char[40] buf) @trusted @nogc nothrow
{
    import core.stdc.stdlib : strtod;

    return strtod(buf.ptr, null);
}

version (unittest)
{
    import perfkit_metrics.sink : MetricsBuffer;
    import perfkit_metrics.standard;
    import perfkit_metrics.labels : Method;

    private string expose(Registry reg, Format f)
    {
        MetricsBuffer b;
        writeExposition(reg, b, f);
        return b.data.idup;
    }
}

unittest
{
    assert(negotiate("application/openmetrics-text; version=1.0.0") == Format.openMetrics);
    assert(negotiate("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
        ~ "text/plain;version=0.0.4;q=0.5,*/*;q=0.1") == Format.openMetrics);
    assert(negotiate("text/plain, Application/OpenMetrics-Text ;q=0.5") == Format.openMetrics);
    assert(negotiate("") == Format.text && negotiate("text/plain;version=0.0.4") == Format.text);
    assert(negotiate("*/*") == Format.text && negotiate("application/openmetrics-textx") == Format.text);
    assert(contentType(Format.text) == "text/plain; version=0.0.4; charset=utf-8");
    assert(contentType(Format.openMetrics) == "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

unittest
{
    MetricsBuffer b;
    foreach (v; [0.0, 1.0, 2.5, -1.25, 0.1, 1e21, 123456789.0, 1.0 / 3, double.infinity, -double.infinity])
    {
        putDouble(b, v);
        b.put(" ");
    }
    putDouble(b, double.nan);
    assert(b.data == "0 1 2.5 -1.25 0.1 1e+21 123456789 0.33333333333333331 +Inf -Inf NaN", b.data);
    b.clear();
    foreach (ns; [0UL, 31_000, 20_000_030_000, 3_600_000_000_000, 1])
    {
        putSecondsOfNs(b, ns);
        b.put(" ");
    }
    assert(b.data == "0 0.000031 20.00003 3600 0.000000001 ", b.data);
}

unittest
{
    // the text format, every kind
    auto reg = new Registry;
    auto server = reg.httpServer("svc", ["/items/{id}"]);
    auto hot = reg.hotPaths("svc", ["parse", "write"]);
    auto c = reg.counter("demo_events_total", "Demo events", ["kind"]);
    auto ca = c.labels("a\"b");
    auto plain = reg.counter("demo_plain", "A counter\\without labels\n").labels();
    auto g = reg.gauge("demo_level", "A \"gauge\"", ["zone"]).labels("eu");
    auto h = reg.histogram("demo_wait_seconds", "Wait").labels();
    reg.gauge("demo_unused", "Never set", ["x"]);
    reg.freeze(2);
    scope (exit) reg.dispose();
    server.observeNs(reg.shard(0), 0, Method.GET, 200, 25_000);   // on a bound: le=2.5e-05
    server.observe(reg.shard(1), 0, Method.GET, 200, 10.000001);  // above the last bound: +Inf only
    server.observeNs(reg.shard(1), 1, Method.DELETE, 404, 700_000);
    hot.observeNs(reg.shard(0), 0, 3_100);
    ca.inc(reg.shard(0), 3);
    ca.inc(reg.shard(1), 2);
    plain.inc(reg.shard(0), 7);
    g.set(reg.shard(0), -1.25);
    h.observe(reg.shard(1), 12);

    const t = expose(reg, Format.text);
    import std.algorithm.searching : canFind, count, endsWith;

    enum l = `service="svc",route="/items/{id}",method="GET",status_class="2xx"`;
    enum n = "http_server_request_duration_seconds";
    assert(t.canFind("# HELP " ~ n ~ " HTTP server request duration in seconds\n# TYPE " ~ n ~ " histogram\n"));
    assert(t.canFind(n ~ "_bucket{" ~ l ~ `,le="2.5e-05"} 1` ~ "\n"));
    assert(t.canFind(n ~ "_bucket{" ~ l ~ `,le="10.0"} 1` ~ "\n"));
    assert(t.canFind(n ~ "_bucket{" ~ l ~ `,le="+Inf"} 2` ~ "\n"));
    assert(t.canFind(n ~ "_count{" ~ l ~ "} 2\n" ~ n ~ "_sum{" ~ l ~ "} 10.000026\n"));
    assert(t.canFind(`route="<unmatched>",method="DELETE",status_class="4xx",le="0.001"} 1`));
    assert(t.count(n ~ "_count{") == 2);  // series without observations stay hidden
    // hot paths: shown from the start
    assert(t.canFind(`perfkit_hotpath_duration_seconds_count{service="svc",hotpath="parse"} 1` ~ "\n"));
    assert(t.canFind(`perfkit_hotpath_duration_seconds_bucket{service="svc",hotpath="write",le="+Inf"} 0` ~ "\n"));
    assert(t.canFind(`perfkit_hotpath_duration_seconds_sum{service="svc",hotpath="write"} 0` ~ "\n"));
    // counters: x_total in the header and the sample; HELP escapes \ and newline, not "
    assert(t.canFind("# HELP demo_events_total Demo events\n# TYPE demo_events_total counter\n"
        ~ `demo_events_total{kind="a\"b"} 5` ~ "\n"));
    assert(t.canFind("# HELP demo_plain_total A counter\\\\without labels\\n\n"));
    assert(t.canFind("\ndemo_plain_total 7\n"));
    assert(t.canFind("# HELP demo_level A \"gauge\"\n# TYPE demo_level gauge\n"
        ~ `demo_level{zone="eu"} -1.25` ~ "\n"));
    assert(t.canFind(`demo_wait_seconds_bucket{le="10.0"} 0` ~ "\n" ~ `demo_wait_seconds_bucket{le="+Inf"} 1`));
    assert(t.canFind("demo_wait_seconds_count 1\ndemo_wait_seconds_sum 12\n"));
    assert(t.endsWith("# HELP demo_unused Never set\n# TYPE demo_unused gauge\n")); // announced, no series
    assert(!t.canFind("# EOF") && !t.canFind("_created"));
    foreach (le; leLabels)
        assert(t.canFind(`le="` ~ le ~ `"`));

    const o = expose(reg, Format.openMetrics);
    assert(o.canFind("# HELP demo_events Demo events\n# TYPE demo_events counter\n"
        ~ `demo_events_total{kind="a\"b"} 5` ~ "\n"));
    assert(o.canFind("# HELP demo_level A \\\"gauge\\\"\n"));
    assert(o.endsWith("# TYPE demo_unused gauge\n# EOF\n"));
}

unittest
{
    // writing is @nogc nothrow with a @nogc nothrow sink
    auto reg = new Registry;
    auto s = reg.httpServer("svc", ["/"]);
    reg.freeze(1);
    scope (exit) reg.dispose();
    static void scrape(const Registry r, ref MetricsBuffer b) @nogc nothrow
    {
        writeExposition(r, b, negotiate("application/openmetrics-text"));
    }
    MetricsBuffer b;
    s.observeNs(reg.shard(0), 0, Method.GET, 200, 1);
    scrape(reg, b);
    import std.algorithm.searching : endsWith;
    assert(b.data.endsWith("# EOF\n"));
}
