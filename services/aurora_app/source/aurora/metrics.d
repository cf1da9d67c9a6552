/**
 * Prometheus metrics, written by hand in the text exposition format.
 *
 * Every worker thread records into its own block of counters (no atomics or
 * locks on the request path); a scrape sums the blocks. Names follow the
 * project conventions: `http_server_request_duration_seconds` with labels
 * service, route (the route template), method and status_class, buckets
 * 25 µs … 10 s. GC counters prove the request path does not allocate.
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
    auto s = &w.series[(route * nMethods + method) * nClasses + cls];
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
                {
                    const s = &w.series[(route * nMethods + m) * nClasses + c];
                    if (s.count == 0)
                        continue;
                    foreach (b; 0 .. nBuckets + 1)
                        sum.buckets[b] += s.buckets[b];
                    sum.count += s.count;
                    sum.sumNs += s.sumNs;
                }
                if (sum.count == 0)
                    continue;
                ulong cum = 0;
                foreach (b; 0 .. nBuckets + 1)
                {
                    cum += sum.buckets[b];
                    r.put(h ~ "_bucket");
                    putLabels(r, route, m, c);
                    r.put(`,le="`);
                    r.put(b < nBuckets ? bucketLabels[b] : "+Inf");
                    r.put(`"} `);
                    r.putUint(cum);
                    r.putChar('\n');
                }
                r.put(h ~ "_sum");
                putLabels(r, route, m, c);
                r.put("} ");
                putSeconds(r, sum.sumNs);
                r.putChar('\n');
                r.put(h ~ "_count");
                putLabels(r, route, m, c);
                r.put("} ");
                r.putUint(sum.count);
                r.putChar('\n');
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
