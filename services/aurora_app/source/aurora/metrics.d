/**
 * aurora's metrics: its wiring of the perfkit metrics library (//perfkit/metrics:perfkit_metrics_d, which owns
 * the names, buckets, per-worker shards and the exposition).
 *
 * What is aurora's own: the route labels (the router's templates, `<unmatched>` for 404/405 and `<invalid>`
 * for requests the parser rejected), the three sampled hot paths of a request — parse, handle (router and
 * handler) and write (the socket write of the batch that holds a timed request) — and the GC and connection
 * metrics, expressed through the library's generic families. Every worker records into its own shard with no
 * lock or atomic read-modify-write, `@nogc nothrow`; a scrape sums the shards.
 */
module aurora.metrics;

import core.memory : GC;
import core.time : MonoTime;
import perfkit_metrics;
import aurora.parser : ParsedMethod = Method;

/// Route label of requests the parser rejected (no route was looked at).
enum invalidRouteLabel = "<invalid>";

/// The sampled hot paths, in the order of their labels.
enum Hotpath : ubyte
{
    parse,  /// parsing a request (the call of the parser that completes it)
    handle, /// router + handler writing the response into the output buffer
    write,  /// the socket write of the batch that holds a sampled response
}
immutable string[Hotpath.max + 1] hotpathLabels = ["parse", "handle", "write"];
/// One request in this many is timed per worker (a power of two), the first one included.
enum uint hotSampleEvery = 64;

/// One worker's recording state; only that worker touches it.
struct WorkerMetrics
{
    Shard* shard;
    Sampler sampler; /// which requests get their hot paths timed
}

__gshared Registry registry;
__gshared WorkerMetrics*[] workerMetrics;

private __gshared
{
    ServerRequests requests;
    HotPaths hot;
    size_t[] routeLabelOf; // router route index -> route label index
    size_t invalidLabel;
    CounterSeries gcAllocated, accepted, rejected;
    GaugeSeries heapUsed, connectionsOpen, bufferBytes, workersGauge;
}

/// aurora's parsed method -> the label's (OTHER is looked at again: CONNECT and TRACE have labels of their own)
private immutable Method[ParsedMethod.max + 1] methodLabelOf = [
    Method.GET, Method.HEAD, Method.POST, Method.PUT, Method.DELETE, Method.PATCH, Method.OPTIONS, Method.OTHER,
];

/// Register every family and series (labelled `service="<serviceName>"`), then allocate one shard per worker; call once at start-up, before the
/// workers run (the unittests call it again: the previous registry is dropped).
void initMetrics(string serviceName, const(string)[] routes, size_t workers)
{
    if (registry !is null)
        registry.dispose();
    auto reg = new Registry;
    requests = reg.httpServer(serviceName, routes ~ [invalidRouteLabel]);
    routeLabelOf = new size_t[routes.length];
    foreach (i, r; routes)
        routeLabelOf[i] = requests.route(r);
    invalidLabel = requests.route(invalidRouteLabel);
    hot = reg.hotPaths(serviceName, hotpathLabels[], hotSampleEvery);

    static immutable service = ["service"];
    gcAllocated = reg.counter("aurora_gc_allocated_bytes", "Bytes allocated on the GC heap by the worker threads"
        ~ " (refreshed at least once a second; the scraping worker's own share is exact).", service)
        .labels(serviceName);
    heapUsed = reg.gauge("aurora_gc_heap_used_bytes", "Bytes in use on the GC heap (all threads).", service)
        .labels(serviceName);
    connectionsOpen = reg.gauge("aurora_connections_open", "Open client connections.", service).labels(serviceName);
    bufferBytes = reg.gauge("aurora_connection_buffer_bytes",
        "Bytes of read and write buffers held by open connections and kept for reuse.", service).labels(serviceName);
    accepted = reg.counter("aurora_connections_accepted", "Connections accepted.", service).labels(serviceName);
    rejected = reg.counter("aurora_connections_rejected", "Connections refused at the connection limit.", service)
        .labels(serviceName);
    workersGauge = reg.gauge("aurora_workers", "Worker threads.", service).labels(serviceName);

    reg.freeze(workers);
    workerMetrics = new WorkerMetrics*[workers];
    foreach (i, ref w; workerMetrics)
    {
        // on cache lines of its own: the sampler is written per request, by its worker only
        import core.sys.posix.stdlib : posix_memalign;
        void* p;
        enum size = (WorkerMetrics.sizeof + 63) / 64 * 64;
        if (posix_memalign(&p, 64, size) != 0)
            assert(0, "out of memory");
        w = cast(WorkerMetrics*) p;
        *w = WorkerMetrics(reg.shard(i), hot.sampler);
    }
    workersGauge.set(reg.global, workers);
    registry = reg;
}

@nogc nothrow {

/// Route label of router route `i`.
pragma(inline, true)
size_t routeLabel(size_t i) { return i < routeLabelOf.length ? routeLabelOf[i] : requests.unmatched; }
/// Route label of requests that matched no route (404/405).
pragma(inline, true)
size_t unmatchedRoute() { return requests.unmatched; }
/// Route label of requests rejected by the parser.
pragma(inline, true)
size_t invalidRoute() { return invalidLabel; }

/// One request: its route label, method (the text decides for `OTHER`), status and duration.
pragma(inline, true)
void observe(WorkerMetrics* w, size_t route, ParsedMethod method, const(char)[] methodText, int status,
             ulong ns)
{
    Method m = methodLabelOf[method];
    if (m == Method.OTHER)
        m = methodOf(methodText);
    requests.observeNs(w.shard, route, m, status, ns);
}

/// Record one timed call of a hot path (the caller samples with `w.sampler`).
pragma(inline, true)
void observeHot(WorkerMetrics* w, Hotpath p, ulong ns) { hot.observeNs(w.shard, p, ns); }

/// One hot-path interval of a sampled request: `start(on)` notes the time when the request is sampled, `stop`
/// records the interval into the path's histogram (neither reads the clock for the other requests).
struct HotSpan
{
    private MonoTime t0;
    private bool on;

@nogc nothrow:

    pragma(inline, true)
    static HotSpan start(bool sampled)
    {
        HotSpan s;
        if (sampled)
        {
            s.on = true;
            s.t0 = MonoTime.currTime;
        }
        return s;
    }

    pragma(inline, true)
    void stop(WorkerMetrics* w, Hotpath p)
    {
        if (on)
            observeHot(w, p, cast(ulong)(MonoTime.currTime - t0).total!"nsecs");
    }
}

void connectionAccepted(WorkerMetrics* w)
{
    accepted.inc(w.shard);
    connectionsOpen.add(w.shard, 1);
}

void connectionClosed(WorkerMetrics* w) { connectionsOpen.add(w.shard, -1); }
void connectionRejected(WorkerMetrics* w) { rejected.inc(w.shard); }
void setBufferBytes(WorkerMetrics* w, long bytes) { bufferBytes.set(w.shard, bytes); }

// The GC's C entry points, declared here with their real attributes
// (core.memory's wrappers are not marked @nogc).
private extern (C) ulong gc_allocatedInCurrentThread() nothrow @nogc;
private extern (C) GC.Stats gc_stats() nothrow @nogc;

/// Bytes the calling thread has allocated on the GC heap since it started.
ulong gcAllocatedInThisThread() { return gc_allocatedInCurrentThread(); }

/// Publish the calling worker's GC allocation counter (its own shard, so call it on the worker).
void publishGc(WorkerMetrics* w) { gcAllocated.setTotal(w.shard, gcAllocatedInThisThread()); }

} // @nogc nothrow

/// Write the whole exposition into `r` (anything with `put(const(char)[])`, e.g. a streamed response).
void renderMetrics(Sink)(ref Sink r, Format format)
{
    heapUsed.set(registry.global, gc_stats().usedSize);
    writeExposition(registry, r, format);
}

version (unittest)
{
    import aurora.response : Buffer, Response;

    private string scrape(Format format = Format.text)
    {
        Buffer b;
        scope (exit) b.release();
        auto r = Response(&b, false, true);
        r.begin(200, contentType(format));
        renderMetrics(r, format);
        r.finish();
        return (cast(const(char)[]) b.data).idup;
    }
}

unittest
{
    initMetrics("aurora_app", ["/a", "/b/:id"], 2);
    observe(workerMetrics[0], routeLabel(0), ParsedMethod.GET, "GET", 200, 30_000);
    observe(workerMetrics[1], routeLabel(0), ParsedMethod.GET, "GET", 204, 20_000_000_000);
    observe(workerMetrics[1], routeLabel(1), ParsedMethod.POST, "POST", 503, 1);
    observe(workerMetrics[0], unmatchedRoute, ParsedMethod.OTHER, "TRACE", 404, 1);
    observe(workerMetrics[0], invalidRoute, ParsedMethod.OTHER, null, 400, 0);
    const s = scrape();
    import std.algorithm.searching : canFind;
    enum l = `{service="aurora_app",route="/a",method="GET",status_class="2xx"`;
    enum h = "http_server_request_duration_seconds";
    assert(s.canFind("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
    assert(s.canFind(h ~ "_bucket" ~ l ~ `,le="2.5e-05"} 0` ~ "\n"));
    assert(s.canFind(h ~ "_bucket" ~ l ~ `,le="5e-05"} 1` ~ "\n"));
    assert(s.canFind(h ~ "_bucket" ~ l ~ `,le="10.0"} 1` ~ "\n"));
    assert(s.canFind(h ~ "_bucket" ~ l ~ `,le="+Inf"} 2` ~ "\n"));
    assert(s.canFind(h ~ "_sum" ~ l ~ "} 20.00003\n"));
    assert(s.canFind(h ~ "_count" ~ l ~ "} 2\n"));
    assert(s.canFind(`route="/b/:id",method="POST",status_class="5xx"`));
    assert(s.canFind(`route="<unmatched>",method="TRACE",status_class="4xx"`));
    assert(s.canFind(`route="<invalid>",method="OTHER",status_class="4xx"`));
    assert(!s.canFind(`method="PUT"`));
    assert(s.canFind("# TYPE aurora_gc_allocated_bytes_total counter\n"));
    assert(s.canFind("aurora_gc_allocated_bytes_total{service=\"aurora_app\"} "));
    assert(s.canFind("aurora_workers{service=\"aurora_app\"} 2\n"));
}

unittest
{
    // the hot-path histogram: every hot path exported, summed over workers
    initMetrics("aurora_app", ["/a"], 3);
    observeHot(workerMetrics[0], Hotpath.parse, 1_000);          // 1 µs: first bucket
    observeHot(workerMetrics[2], Hotpath.parse, 30_000);         // 30 µs: le=5e-05
    observeHot(workerMetrics[1], Hotpath.handle, 25_000);        // on a bound: le=2.5e-05
    observeHot(workerMetrics[1], Hotpath.write, 11_000_000_000); // over 10 s: +Inf only
    connectionAccepted(workerMetrics[0]);
    connectionAccepted(workerMetrics[1]);
    connectionAccepted(workerMetrics[1]);
    connectionClosed(workerMetrics[1]);
    connectionRejected(workerMetrics[2]);
    setBufferBytes(workerMetrics[2], 4096);
    const s = scrape();
    import std.algorithm.searching : canFind, count;
    enum hp = "perfkit_hotpath_duration_seconds";
    enum parse = `{service="aurora_app",hotpath="parse"`;
    enum handle = `{service="aurora_app",hotpath="handle"`;
    enum write = `{service="aurora_app",hotpath="write"`;
    assert(s.canFind("# TYPE " ~ hp ~ " histogram\n"));
    assert(s.canFind("# HELP " ~ hp ~ " Duration of sampled hot paths in seconds\n"));
    assert(s.canFind(hp ~ "_bucket" ~ parse ~ `,le="2.5e-05"} 1` ~ "\n"));
    assert(s.canFind(hp ~ "_bucket" ~ parse ~ `,le="5e-05"} 2` ~ "\n"));
    assert(s.canFind(hp ~ "_bucket" ~ parse ~ `,le="+Inf"} 2` ~ "\n"));
    assert(s.canFind(hp ~ "_sum" ~ parse ~ "} 0.000031\n"));
    assert(s.canFind(hp ~ "_count" ~ parse ~ "} 2\n"));
    assert(s.canFind(hp ~ "_bucket" ~ handle ~ `,le="2.5e-05"} 1` ~ "\n"));
    assert(s.canFind(hp ~ "_count" ~ handle ~ "} 1\n"));
    assert(s.canFind(hp ~ "_bucket" ~ write ~ `,le="10.0"} 0` ~ "\n"));
    assert(s.canFind(hp ~ "_bucket" ~ write ~ `,le="+Inf"} 1` ~ "\n"));
    assert(s.canFind(hp ~ "_sum" ~ write ~ "} 11\n"));
    assert(s.canFind(hp ~ "_count" ~ write ~ "} 1\n"));
    // 19 buckets + sum + count per hot path, no other label sets
    assert(s.count(hp ~ "_bucket{") == 3 * bucketCount);
    assert(s.count(hp ~ "_count{") == 3);
    // the request histogram (no requests here: no series) comes first, the other metrics follow
    import std.string : indexOf;
    assert(s.count("http_server_request_duration_seconds_count{") == 0);
    assert(s.indexOf("# TYPE http_server_request_duration_seconds histogram")
        < s.indexOf("# TYPE " ~ hp ~ " histogram"));
    assert(s.indexOf("# TYPE " ~ hp ~ " histogram") < s.indexOf("# TYPE aurora_gc_allocated_bytes_total"));
    assert(s.canFind("aurora_workers{service=\"aurora_app\"} 3\n"));
    assert(s.canFind("aurora_connections_open{service=\"aurora_app\"} 2\n"));
    assert(s.canFind("aurora_connections_accepted_total{service=\"aurora_app\"} 3\n"));
    assert(s.canFind("aurora_connections_rejected_total{service=\"aurora_app\"} 1\n"));
    assert(s.canFind("aurora_connection_buffer_bytes{service=\"aurora_app\"} 4096\n"));
}

unittest
{
    // before any sample, the three hot paths are exported at 0; OpenMetrics on request
    initMetrics("aurora_app", ["/a"], 1);
    const s = scrape(Format.openMetrics);
    import std.algorithm.searching : canFind, endsWith;
    foreach (p; ["parse", "handle", "write"])
    {
        const l = `{service="aurora_app",hotpath="` ~ p ~ `"`;
        assert(s.canFind("perfkit_hotpath_duration_seconds_bucket" ~ l ~ `,le="+Inf"} 0` ~ "\n"));
        assert(s.canFind("perfkit_hotpath_duration_seconds_sum" ~ l ~ "} 0\n"));
        assert(s.canFind("perfkit_hotpath_duration_seconds_count" ~ l ~ "} 0\n"));
    }
    assert(s.canFind("Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"));
    assert(s.canFind("# TYPE aurora_gc_allocated_bytes counter\n"));
    assert(s.endsWith("# EOF\n"));
}

unittest
{
    // recording and scraping allocate nothing on the GC heap
    initMetrics("aurora_app", ["/a"], 1);
    static void requestPath(WorkerMetrics* w) @nogc nothrow
    {
        observe(w, routeLabel(0), ParsedMethod.GET, "GET", 200, 1_000);
        if (w.sampler.next())
            observeHot(w, Hotpath.parse, 1_000);
        connectionAccepted(w);
        publishGc(w);
    }
    static void scrapePath(ref Response r) @nogc nothrow { renderMetrics(r, Format.text); }
    Buffer b;
    scope (exit) b.release();
    auto r = Response(&b, false, true);
    r.begin(200, "text/plain");
    const before = gcAllocatedInThisThread();
    foreach (i; 0 .. 1000)
        requestPath(workerMetrics[0]);
    scrapePath(r);
    assert(gcAllocatedInThisThread() == before);
}
