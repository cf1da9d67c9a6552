/**
 * Prometheus metrics, written by hand in the text exposition format.
 *
 * Every worker thread records into its own block of counters (no atomics or
 * locks on the request path); a scrape sums the blocks. Names follow the
 * project conventions: `http_server_request_duration_seconds` with labels
 * service, route (the route template), method and status_class, buckets
 * 25 µs … 10 s. GC counters prove the request path does not allocate.
 *
 * `perfkit_hotpath_duration_seconds` (labels service, hotpath) times the three
 * hot paths of a request — parse, handle (router and handler) and write (the
 * socket write of the batch) — on a sample: one request in `hotSampleEvery`
 * per worker, so the timing costs nearly nothing on the other requests.
 */
module aurora.metrics;

import core.atomic : atomicLoad, atomicStore, MemoryOrder;
import core.memory : GC;
import core.stdc.stdlib : calloc;
import aurora.parser : Method, methodNames;
import aurora.response : Response, Buffer;

enum serviceName = "aurora_app";

/// Bucket upper bounds in nanoseconds, and the same as Prometheus `le` labels.
immutable ulong[18] bucketBoundsNs = [
    25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 50_000_000,
    100_000_000, 250_000_000, 500_000_000,
    1_000_000_000, 2_500_000_000, 5_000_000_000, 10_000_000_000,
];
immutable string[18] bucketLabels = [
    "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005",
    "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1", "0.25", "0.5", "1", "2.5", "5", "10",
];
enum nBuckets = bucketBoundsNs.length;
enum nMethods = Method.max + 1;
enum nClasses = 5;
immutable string[nClasses] classLabels = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The sampled hot paths, in the order of their labels.
enum Hotpath : ubyte
{
    parse,  /// parsing a request (the call of the parser that completes it)
    handle, /// router + handler writing the response into the output buffer
    write,  /// the socket write of the batch that holds a sampled response
}
enum nHotpaths = Hotpath.max + 1;
immutable string[nHotpaths] hotpathLabels = ["parse", "handle", "write"];
/// One request in this many is timed per worker (a power of two).
enum uint hotSampleEvery = 64;
static assert((hotSampleEvery & (hotSampleEvery - 1)) == 0);
private enum hotSampleEveryText = () { import std.conv : to; return hotSampleEvery.to!string; }();

struct Series
{
    ulong[nBuckets + 1] buckets; // per bucket (not cumulative); last = +Inf
    ulong count;
    ulong sumNs;
}

/// One worker's counters; written only by that worker.
struct WorkerMetrics
{
    Series* series;          // [route][method][class]
    Series[nHotpaths] hot;   // perfkit_hotpath_duration_seconds, by Hotpath
    shared ulong gcAllocated; // GC.allocatedInCurrentThread of the worker
    shared long connections;
    shared long bufferBytes;
    shared ulong accepted;
    shared ulong rejected;    // refused at the connection limit
}

__gshared string[] routeLabels;       // route templates + "unmatched" + "invalid"
__gshared WorkerMetrics*[] workerMetrics;
__gshared ulong mainThreadGcBaseline;

/// Label index used for requests that matched no route (404/405).
size_t unmatchedRoute() @nogc nothrow { return routeLabels.length - 2; }
/// Label index used for requests rejected by the parser.
size_t invalidRoute() @nogc nothrow { return routeLabels.length - 1; }

/// Set up the storage; call once at start-up, before the workers run.
void initMetrics(const(string)[] routes, size_t workers)
{
    routeLabels = routes.dup ~ ["unmatched", "invalid"];
    workerMetrics = new WorkerMetrics*[workers];
    foreach (ref w; workerMetrics)
    {
        w = cast(WorkerMetrics*) calloc(1, WorkerMetrics.sizeof);
        w.series = cast(Series*) calloc(routeLabels.length * nMethods * nClasses, Series.sizeof);
        assert(w && w.series, "out of memory");
    }
}

@nogc nothrow {

void observe(WorkerMetrics* w, size_t route, Method method, int status, ulong ns)
{
    int cls = status / 100 - 1;
    if (cls < 0 || cls >= nClasses)
        cls = 4;
    record(&w.series[(route * nMethods + method) * nClasses + cls], ns);
}

/// Record one timed call of a hot path (the caller does the sampling).
void observeHot(WorkerMetrics* w, Hotpath p, ulong ns)
{
    record(&w.hot[p], ns);
}

private void record(Series* s, ulong ns)
{
    size_t b = 0;
    while (b < nBuckets && ns > bucketBoundsNs[b])
        b++;
    s.buckets[b]++;
    s.count++;
    s.sumNs += ns;
}

// The GC's C entry points, declared here with their real attributes
// (core.memory's wrappers are not marked @nogc).
private extern (C) ulong gc_allocatedInCurrentThread() nothrow @nogc;
private extern (C) GC.Stats gc_stats() nothrow @nogc;

/// Bytes the calling thread has allocated on the GC heap since it started.
ulong gcAllocatedInThisThread() { return gc_allocatedInCurrentThread(); }

private ulong gcHeapUsed() { return gc_stats().usedSize; }

private void putLabels(ref Response r, size_t route, size_t m, size_t c)
{
    r.put(`{service="` ~ serviceName ~ `",route="`);
    r.put(routeLabels[route]);
    r.put(`",method="`);
    r.put(methodNames[m]);
    r.put(`",status_class="`);
    r.put(classLabels[c]);
    r.put(`"`);
}

private void putSeconds(ref Response r, ulong ns)
{
    r.putUint(ns / 1_000_000_000);
    char[10] frac = ".000000000";
    ulong f = ns % 1_000_000_000;
    foreach_reverse (i; 1 .. 10)
    {
        frac[i] = cast(char)('0' + f % 10);
        f /= 10;
    }
    r.put(frac[]);
}

private void addInto(ref Series sum, ref const Series s)
{
    if (s.count == 0)
        return;
    foreach (b; 0 .. nBuckets + 1)
        sum.buckets[b] += s.buckets[b];
    sum.count += s.count;
    sum.sumNs += s.sumNs;
}

/// The `_bucket` (cumulative), `_sum` and `_count` lines of one series;
/// `labels(r)` writes `{name="value",...` without the closing brace.
private void putSeries(alias labels)(ref Response r, string name, ref const Series s)
{
    ulong cum = 0;
    foreach (b; 0 .. nBuckets + 1)
    {
        cum += s.buckets[b];
        r.put(name);
        r.put("_bucket");
        labels(r);
        r.put(`,le="`);
        r.put(b < nBuckets ? bucketLabels[b] : "+Inf");
        r.put(`"} `);
        r.putUint(cum);
        r.putChar('\n');
    }
    r.put(name);
    r.put("_sum");
    labels(r);
    r.put("} ");
    putSeconds(r, s.sumNs);
    r.putChar('\n');
    r.put(name);
    r.put("_count");
    labels(r);
    r.put("} ");
    r.putUint(s.count);
    r.putChar('\n');
}

/// Write the whole exposition into `r` (a streamed response).
void renderMetrics(ref Response r)
{
    enum h = "http_server_request_duration_seconds";
    r.put("# HELP " ~ h ~ " Time from reading a request to its response being built.\n");
    r.put("# TYPE " ~ h ~ " histogram\n");
    foreach (route; 0 .. routeLabels.length)
        foreach (m; 0 .. nMethods)
            foreach (c; 0 .. nClasses)
            {
                Series sum;
                foreach (w; workerMetrics)
                    addInto(sum, w.series[(route * nMethods + m) * nClasses + c]);
                if (sum.count == 0)
                    continue;
                putSeries!((ref Response o) => putLabels(o, route, m, c))(r, h, sum);
            }

    enum hp = "perfkit_hotpath_duration_seconds";
    r.put("# HELP " ~ hp ~ " Time of a request's hot paths: parse, handle (router and handler),"
        ~ " write (the socket write of the batch); one request in " ~ hotSampleEveryText ~ " per worker is timed.\n");
    r.put("# TYPE " ~ hp ~ " histogram\n");
    foreach (p; 0 .. nHotpaths)
    {
        // every hot path is exported, at 0 until its first sample
        Series sum;
        foreach (w; workerMetrics)
            addInto(sum, w.hot[p]);
        putSeries!((ref Response o) {
            o.put(`{service="` ~ serviceName ~ `",hotpath="`);
            o.put(hotpathLabels[p]);
            o.put(`"`);
        })(r, hp, sum);
    }

    ulong gc, accepted, rejected;
    long conns, bufBytes;
    foreach (w; workerMetrics)
    {
        gc += atomicLoad!(MemoryOrder.raw)(w.gcAllocated);
        conns += atomicLoad!(MemoryOrder.raw)(w.connections);
        bufBytes += atomicLoad!(MemoryOrder.raw)(w.bufferBytes);
        accepted += atomicLoad!(MemoryOrder.raw)(w.accepted);
        rejected += atomicLoad!(MemoryOrder.raw)(w.rejected);
    }
    enum svc = `{service="` ~ serviceName ~ `"} `;
    r.put("# HELP aurora_gc_allocated_bytes_total Bytes allocated on the GC heap by the worker threads"
        ~ " (refreshed at least once a second; the scraping worker's own share is exact).\n"
        ~ "# TYPE aurora_gc_allocated_bytes_total counter\naurora_gc_allocated_bytes_total" ~ svc);
    r.putUint(gc);
    r.put("\n# HELP aurora_gc_heap_used_bytes Bytes in use on the GC heap (all threads).\n"
        ~ "# TYPE aurora_gc_heap_used_bytes gauge\naurora_gc_heap_used_bytes" ~ svc);
    r.putUint(gcHeapUsed());
    r.put("\n# HELP aurora_connections_open Open client connections.\n"
        ~ "# TYPE aurora_connections_open gauge\naurora_connections_open" ~ svc);
    r.putInt(conns);
    r.put("\n# HELP aurora_connection_buffer_bytes Bytes of read and write buffers held by open connections.\n"
        ~ "# TYPE aurora_connection_buffer_bytes gauge\naurora_connection_buffer_bytes" ~ svc);
    r.putInt(bufBytes);
    r.put("\n# HELP aurora_connections_accepted_total Connections accepted.\n"
        ~ "# TYPE aurora_connections_accepted_total counter\naurora_connections_accepted_total" ~ svc);
    r.putUint(accepted);
    r.put("\n# HELP aurora_connections_rejected_total Connections refused at the connection limit.\n"
        ~ "# TYPE aurora_connections_rejected_total counter\naurora_connections_rejected_total" ~ svc);
    r.putUint(rejected);
    r.put("\n# HELP aurora_workers Worker threads.\n# TYPE aurora_workers gauge\naurora_workers" ~ svc);
    r.putUint(workerMetrics.length);
    r.putChar('\n');
}

} // @nogc nothrow

unittest
{
    initMetrics(["/a", "/b/:id"], 2);
    observe(workerMetrics[0], 0, Method.GET, 200, 30_000);
    observe(workerMetrics[1], 0, Method.GET, 204, 20_000_000_000);
    observe(workerMetrics[1], 1, Method.POST, 503, 1);
    Buffer b;
    scope (exit) b.release();
    auto r = Response(&b, false, true);
    r.begin(200, "text/plain");
    renderMetrics(r);
    r.finish();
    import std.algorithm.searching : canFind;
    const s = cast(const(char)[]) b.data;
    enum l = `{service="aurora_app",route="/a",method="GET",status_class="2xx"`;
    assert(s.canFind("http_server_request_duration_seconds_bucket" ~ l ~ `,le="2.5e-05"} 0` ~ "\n"));
    assert(s.canFind("http_server_request_duration_seconds_bucket" ~ l ~ `,le="5e-05"} 1` ~ "\n"));
    assert(s.canFind("http_server_request_duration_seconds_bucket" ~ l ~ `,le="10"} 1` ~ "\n"));
    assert(s.canFind("http_server_request_duration_seconds_bucket" ~ l ~ `,le="+Inf"} 2` ~ "\n"));
    assert(s.canFind("http_server_request_duration_seconds_sum" ~ l ~ "} 20.000030000\n"));
    assert(s.canFind("http_server_request_duration_seconds_count" ~ l ~ "} 2\n"));
    assert(s.canFind(`route="/b/:id",method="POST",status_class="5xx"`));
    assert(!s.canFind(`method="PUT"`));
    assert(s.canFind("aurora_gc_allocated_bytes_total{service=\"aurora_app\"} "));
}

unittest
{
    // the hot-path histogram: every hot path exported, summed over workers
    initMetrics(["/a"], 3);
    observeHot(workerMetrics[0], Hotpath.parse, 1_000);        // 1 µs: first bucket
    observeHot(workerMetrics[2], Hotpath.parse, 30_000);       // 30 µs: le=5e-05
    observeHot(workerMetrics[1], Hotpath.handle, 25_000);      // on a bound: le=2.5e-05
    observeHot(workerMetrics[1], Hotpath.write, 11_000_000_000); // over 10 s: +Inf only
    Buffer b;
    scope (exit) b.release();
    auto r = Response(&b, false, true);
    r.begin(200, "text/plain");
    renderMetrics(r);
    r.finish();
    import std.algorithm.searching : canFind, count;
    const s = cast(const(char)[]) b.data;
    enum hp = "perfkit_hotpath_duration_seconds";
    enum parse = `{service="aurora_app",hotpath="parse"`;
    enum handle = `{service="aurora_app",hotpath="handle"`;
    enum write = `{service="aurora_app",hotpath="write"`;
    assert(s.canFind("# TYPE " ~ hp ~ " histogram\n"));
    assert(s.canFind("# HELP " ~ hp ~ " "));
    assert(s.canFind(" one request in 64 per worker is timed.\n"));
    assert(s.canFind(hp ~ "_bucket" ~ parse ~ `,le="2.5e-05"} 1` ~ "\n"));
    assert(s.canFind(hp ~ "_bucket" ~ parse ~ `,le="5e-05"} 2` ~ "\n"));
    assert(s.canFind(hp ~ "_bucket" ~ parse ~ `,le="+Inf"} 2` ~ "\n"));
    assert(s.canFind(hp ~ "_sum" ~ parse ~ "} 0.000031000\n"));
    assert(s.canFind(hp ~ "_count" ~ parse ~ "} 2\n"));
    assert(s.canFind(hp ~ "_bucket" ~ handle ~ `,le="2.5e-05"} 1` ~ "\n"));
    assert(s.canFind(hp ~ "_count" ~ handle ~ "} 1\n"));
    assert(s.canFind(hp ~ "_bucket" ~ write ~ `,le="10"} 0` ~ "\n"));
    assert(s.canFind(hp ~ "_bucket" ~ write ~ `,le="+Inf"} 1` ~ "\n"));
    assert(s.canFind(hp ~ "_sum" ~ write ~ "} 11.000000000\n"));
    assert(s.canFind(hp ~ "_count" ~ write ~ "} 1\n"));
    // 19 buckets + sum + count per hot path, no other label sets
    assert(s.count(hp ~ "_bucket{") == 3 * (nBuckets + 1));
    assert(s.count(hp ~ "_count{") == 3);
    // the request histogram (no requests here: no series) comes first, the other metrics follow
    import std.string : indexOf;
    assert(s.count("http_server_request_duration_seconds_count{") == 0);
    assert(s.indexOf("# TYPE http_server_request_duration_seconds histogram")
        < s.indexOf("# TYPE " ~ hp ~ " histogram"));
    assert(s.indexOf("# TYPE " ~ hp ~ " histogram") < s.indexOf("# TYPE aurora_gc_allocated_bytes_total"));
    assert(s.canFind("aurora_workers{service=\"aurora_app\"} 3\n"));
}

unittest
{
    // before any sample, the three hot paths are exported at 0
    initMetrics(["/a"], 1);
    Buffer b;
    scope (exit) b.release();
    auto r = Response(&b, false, true);
    r.begin(200, "text/plain");
    renderMetrics(r);
    r.finish();
    import std.algorithm.searching : canFind;
    const s = cast(const(char)[]) b.data;
    foreach (p; ["parse", "handle", "write"])
    {
        const l = `{service="aurora_app",hotpath="` ~ p ~ `"`;
        assert(s.canFind("perfkit_hotpath_duration_seconds_bucket" ~ l ~ `,le="+Inf"} 0` ~ "\n"));
        assert(s.canFind("perfkit_hotpath_duration_seconds_sum" ~ l ~ "} 0.000000000\n"));
        assert(s.canFind("perfkit_hotpath_duration_seconds_count" ~ l ~ "} 0\n"));
    }
}
