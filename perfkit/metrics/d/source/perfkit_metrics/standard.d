/**
 * The standard families of SPEC.md: server requests, sampled hot paths, client requests and their stages.
 *
 * Each is registered densely at start-up: a server's series are every route × method × status class (the
 * series without observations stay hidden), so that the request path computes a slot from three small indexes
 * and never looks a label up. Hot paths are exposed from the start (at 0 until their first sample).
 *
 *     auto server = reg.httpServer("my_service", ["/items/{id}", "/health"]);  // adds "<unmatched>"
 *     auto hot = reg.hotPaths("my_service", ["parse", "handler", "write"]);   // one call in 64
 *     reg.freeze(workers);
 *     // per request, on worker w (@nogc nothrow):
 *     server.observeNs(reg.shard(w), route, methodOf(methodText), status, ns);
 */
module perfkit_metrics.standard;

import perfkit_metrics.labels;
import perfkit_metrics.registry;
import perfkit_metrics.sampler : Sampler;
import perfkit_metrics.shard : Shard;

enum string serverFamily = "http_server_request_duration_seconds";
enum string serverHelp = "HTTP server request duration in seconds";
immutable string[] serverLabelNames = ["service", "route", "method", "status_class"];

enum string hotpathFamily = "perfkit_hotpath_duration_seconds";
enum string hotpathHelp = "Duration of sampled hot paths in seconds";
immutable string[] hotpathLabelNames = ["service", "hotpath"];

enum string clientFamily = "http_client_request_duration_seconds";
enum string clientHelp = "HTTP client request duration in seconds";
immutable string[] clientLabelNames = ["service", "method", "host", "status_class"];

enum string stageFamily = "http_client_stage_duration_seconds";
enum string stageHelp = "HTTP client request stage duration in seconds";
immutable string[] stageLabelNames = ["service", "stage"];

/// The stages of a client request.
enum Stage : ubyte { pool_wait, connect, tls, ttfb, transfer, decode }
enum size_t stageCount = Stage.max + 1;
immutable string[stageCount] stageLabels = ["pool_wait", "connect", "tls", "ttfb", "transfer", "decode"];

/// The stage named `name`, or -1.
int stageOf(scope const(char)[] name) @safe pure nothrow @nogc
{
    foreach (i, s; stageLabels)
        if (s == name)
            return cast(int) i;
    return -1;
}

private enum size_t perRoute = methodCount * statusClassCount;

/// `http_server_request_duration_seconds` of one service.
struct ServerRequests
{
    private size_t base;
    /// The route labels, by index; `<unmatched>` is the last.
    immutable(string)[] routes;

    /// Index of `<unmatched>`.
    pragma(inline, true)
    size_t unmatched() const @safe pure nothrow @nogc { return routes.length - 1; }

    /// Index of a route template (`unmatched` when it is not registered).
    size_t route(scope const(char)[] template_) const @safe pure nothrow @nogc
    {
        foreach (i, r; routes)
            if (r == template_)
                return i;
        return unmatched;
    }

@nogc nothrow:
    /// One request: the route index, the method, the status code and its duration in nanoseconds. A route
    /// index out of range counts as `<unmatched>`.
    pragma(inline, true)
    void observeNs(Shard* shard, size_t route, Method method, long status, ulong ns)
    {
        seriesOf(route, method, status).observeNs(shard, ns);
    }

    void observe(Shard* shard, size_t route, Method method, long status, double seconds)
    {
        seriesOf(route, method, status).observe(shard, seconds);
    }

    pragma(inline, true)
    private HistogramSeries seriesOf(size_t route, Method method, long status) const
    {
        if (route >= routes.length)
            route = routes.length - 1;
        const m = method <= Method.max ? method : Method.OTHER;
        const series = route * perRoute + m * statusClassCount + statusClassOf(status);
        return HistogramSeries(base + series * histogramSlots);
    }
}

/// Register a service's server requests: every route template (duplicates once) and `<unmatched>`.
/// A service registers its routes once.
ServerRequests httpServer(Registry reg, string service, const(string)[] routes)
{
    auto f = reg.family(Kind.histogram, serverFamily, serverHelp, serverLabelNames);
    auto names = distinct(routes, unmatchedRoute) ~ unmatchedRoute;
    ServerRequests s;
    s.routes = names.idup;
    s.base = addGrid(f, names, (string r, string m, string c) => [service, r, m, c]);
    return s;
}

/// `xs` in their order, each once, without `skip`.
private string[] distinct(const(string)[] xs, string skip)
{
    string[] names;
    foreach (x; xs)
    {
        bool seen = x == skip;
        foreach (n; names)
            seen = seen || n == x;
        if (!seen)
            names ~= x;
    }
    return names;
}

/// One histogram series per key × method × status class, in consecutive slots (what `seriesOf` indexes);
/// returns the first slot. `labelsOf` orders the label values as the family's label names.
private size_t addGrid(Family f, const(string)[] keys, string[] delegate(string, string, string) labelsOf)
{
    size_t base, k;
    foreach (key; keys)
        foreach (m; methodLabels)
            foreach (c; statusClassLabels)
            {
                const slot = addSeries(f, labelsOf(key, m, c), false, true);
                if (k == 0)
                    base = slot;
                assert(slot == base + k * histogramSlots);
                ++k;
            }
    return base;
}

/// `perfkit_hotpath_duration_seconds` of one service: hot paths by index, and the sampling rate.
struct HotPaths
{
    private immutable(size_t)[] slots;
    /// The hot path labels, by index.
    immutable(string)[] names;
    uint sampleEvery = 64;

    /// A sampler for one recording thread (each keeps its own).
    Sampler sampler() const @safe pure { return Sampler(sampleEvery); }

    /// Index of a hot path, or `size_t.max`.
    size_t index(scope const(char)[] name) const @safe pure nothrow @nogc
    {
        foreach (i, n; names)
            if (n == name)
                return i;
        return size_t.max;
    }

@nogc nothrow:
    /// One timed call (the caller samples); an index out of range is ignored.
    pragma(inline, true)
    void observeNs(Shard* shard, size_t hotpath, ulong ns)
    {
        if (hotpath < slots.length)
            HistogramSeries(slots[hotpath]).observeNs(shard, ns);
    }

    void observe(Shard* shard, size_t hotpath, double seconds)
    {
        if (hotpath < slots.length)
            HistogramSeries(slots[hotpath]).observe(shard, seconds);
    }
}

/// Register a service's hot paths (exposed from the start), timed on one call in `sampleEvery`.
HotPaths hotPaths(Registry reg, string service, const(string)[] names, uint sampleEvery = 64)
{
    HotPaths h;
    h.sampleEvery = Sampler(sampleEvery).every; // validates
    auto f = reg.family(Kind.histogram, hotpathFamily, hotpathHelp, hotpathLabelNames);
    size_t[] slots;
    string[] seen;
    foreach (n; names)
    {
        slots ~= addSeries(f, [service, n], true);
        seen ~= n;
    }
    h.slots = slots.idup;
    h.names = seen.idup;
    return h;
}

/// `http_client_request_duration_seconds` and `http_client_stage_duration_seconds` of one service.
struct ClientRequests
{
    private size_t base, stageBase;
    /// The `host:port` labels, by index.
    immutable(string)[] hosts;

    /// Index of a `host:port`, or `size_t.max`.
    size_t host(scope const(char)[] hostPort) const @safe pure nothrow @nogc
    {
        foreach (i, h; hosts)
            if (h == hostPort)
                return i;
        return size_t.max;
    }

@nogc nothrow:
    /// One request (status 0 when no response came); a host not registered is not recorded.
    pragma(inline, true)
    void observeNs(Shard* shard, size_t host, Method method, long status, ulong ns)
    {
        if (host < hosts.length)
            seriesOf(host, method, status).observeNs(shard, ns);
    }

    void observe(Shard* shard, size_t host, Method method, long status, double seconds)
    {
        if (host < hosts.length)
            seriesOf(host, method, status).observe(shard, seconds);
    }

    pragma(inline, true)
    void stageNs(Shard* shard, Stage stage, ulong ns)
    {
        if (stage <= Stage.max)
            HistogramSeries(stageBase + stage * histogramSlots).observeNs(shard, ns);
    }

    void stage(Shard* shard, Stage stage, double seconds)
    {
        if (stage <= Stage.max)
            HistogramSeries(stageBase + stage * histogramSlots).observe(shard, seconds);
    }

    pragma(inline, true)
    private HistogramSeries seriesOf(size_t host, Method method, long status) const
    {
        const m = method <= Method.max ? method : Method.OTHER;
        const series = host * perRoute + m * statusClassCount + statusClassOf(status);
        return HistogramSeries(base + series * histogramSlots);
    }
}

/// Register a client's requests to the given `host:port`s (see `hostLabel`) and its stages.
ClientRequests httpClient(Registry reg, string service, const(string)[] hosts)
{
    auto f = reg.family(Kind.histogram, clientFamily, clientHelp, clientLabelNames);
    auto fs = reg.family(Kind.histogram, stageFamily, stageHelp, stageLabelNames);
    auto names = distinct(hosts, null);
    ClientRequests c;
    c.hosts = names.idup;
    c.base = addGrid(f, names, (string h, string m, string s) => [service, m, h, s]);
    foreach (i, st; stageLabels)
    {
        const slot = addSeries(fs, [service, st], false, true);
        if (i == 0)
            c.stageBase = slot;
        assert(slot == c.stageBase + i * histogramSlots);
    }
    return c;
}

unittest
{
    import perfkit_metrics.buckets : boundCount;

    auto reg = new Registry;
    auto server = reg.httpServer("svc", ["/a", "/b/{id}", "/a"]);
    assert(server.routes == ["/a", "/b/{id}", "<unmatched>"] && server.unmatched == 2);
    assert(server.route("/b/{id}") == 1 && server.route("/nope") == 2);
    auto hot = reg.hotPaths("svc", ["parse", "write"], 4);
    assert(hot.index("write") == 1 && hot.index("x") == size_t.max && hot.sampler.every == 4);
    auto client = reg.httpClient("cli", ["example.org:443"]);
    reg.freeze(1);
    scope (exit) reg.dispose();
    auto s = reg.shard(0);

    server.observeNs(s, 0, Method.GET, 200, 30_000);
    server.observe(s, 0, Method.GET, 204, 20);
    server.observeNs(s, 99, Method.PUT, 0, 1);      // out of range: <unmatched>, status 0: error
    hot.observeNs(s, 1, 2_000);
    hot.observeNs(s, 7, 2_000);                      // ignored
    client.observeNs(s, 0, Method.POST, 503, 900_000);
    client.observeNs(s, 5, Method.POST, 503, 900_000); // not registered: ignored
    client.stageNs(s, Stage.tls, 4_200_000);

    size_t count(const(Family) f, string labels)
    {
        foreach (ref se; f.series)
            if (se.labels == labels)
            {
                ulong n = 0;
                foreach (b; 0 .. boundCount + 1)
                    n += reg.sumU(se.slot + b);
                return cast(size_t) n;
            }
        assert(0, labels);
    }
    auto fams = reg.families;
    assert(fams.length == 4 && fams[0].name == serverFamily && fams[1].name == hotpathFamily);
    assert(count(fams[0], `service="svc",route="/a",method="GET",status_class="2xx"`) == 2);
    assert(count(fams[0], `service="svc",route="<unmatched>",method="PUT",status_class="error"`) == 1);
    assert(count(fams[1], `service="svc",hotpath="write"`) == 1);
    assert(count(fams[1], `service="svc",hotpath="parse"`) == 0);
    assert(count(fams[2], `service="cli",method="POST",host="example.org:443",status_class="5xx"`) == 1);
    assert(count(fams[3], `service="cli",stage="tls"`) == 1);
    assert(fams[0].series.length == 3 * methodCount * statusClassCount);
}

unittest
{
    import std.exception : assertThrown;

    auto reg = new Registry;
    reg.httpServer("svc", ["/a"]);
    assertThrown(reg.httpServer("svc", ["/b"]));   // a service registers its routes once
    reg.httpServer("other", ["/a"]);              // another service shares the family
    assertThrown(reg.hotPaths("svc", ["x"], 3));
    assert(stageOf("ttfb") == Stage.ttfb && stageOf("nope") == -1);
}
