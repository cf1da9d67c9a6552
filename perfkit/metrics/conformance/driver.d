/**
 * The D driver of the conformance test: the observation script (../SPEC.md) on stdin, the exposition on
 * stdout (text format 0.0.4, or OpenMetrics with --openmetrics).
 *
 *     conformance_driver_d [--openmetrics] < observations.tsv
 *
 * The library registers series at start-up and records by handle, so the script is read whole first: a first
 * pass checks every line and registers each family on its first use (HELP as given there) with every series
 * the script will touch, then the registry is frozen (one shard) and a second pass records. A malformed line
 * stops the driver with "line N: …" on stderr and exit status 1.
 */
module driver;

import std.array : split;
import std.conv : to, ConvException;
import std.stdio : stderr, stdin, stdout;

import perfkit_metrics;

private struct Op
{
    size_t line;
    string kind;
    string[] f; // the fields after the operation
    long status;
    double value;
    Method method;
}

private class ScriptError : Exception
{
    this(size_t line, string msg) { super("line " ~ line.to!string ~ ": " ~ msg); }
}

/// A field of the script: `\n` stands for a newline.
private string field(const(char)[] s)
{
    import std.array : replace;

    return s.replace(`\n`, "\n").idup;
}

private string[] list(string s) { return s.length ? s.split(",") : null; }

private long statusOf(string s)
{
    try
        return s.to!long;
    catch (ConvException)
        throw new Exception("status is not an integer: " ~ s);
}

private double numberOf(string s, string what)
{
    try
        return s.to!double;
    catch (ConvException)
        throw new Exception(what ~ " is not a number: " ~ s);
}

/// Parse and check one line (null for comments and empty lines).
private Op* parseLine(size_t number, const(char)[] raw)
{
    if (raw.length == 0 || raw[0] == '#')
        return null;
    string[] parts;
    foreach (p; raw.split("\t"))
        parts ~= field(p);
    auto op = new Op(number, parts[0], parts[1 .. $]);
    size_t want;
    switch (op.kind)
    {
    case "hot", "stage": want = 3; break;
    case "server", "client", "counter", "gauge", "histogram": want = 5; break;
    default: throw new Exception("unknown operation " ~ op.kind);
    }
    if (op.f.length != want)
        throw new Exception(op.kind ~ " takes " ~ want.to!string ~ " fields, got " ~ op.f.length.to!string);
    switch (op.kind)
    {
    case "server":
    case "client":
        op.method = methodOf(op.f[op.kind == "server" ? 2 : 1]);
        op.status = statusOf(op.f[3]);
        op.value = numberOf(op.f[4], "seconds");
        break;
    case "hot":
        op.value = numberOf(op.f[2], "seconds");
        break;
    case "stage":
        if (stageOf(op.f[1]) < 0)
            throw new Exception("unknown stage " ~ op.f[1] ~ " (one of pool_wait connect tls ttfb transfer decode)");
        op.value = numberOf(op.f[2], "seconds");
        break;
    case "counter":
        op.value = numberOf(op.f[4], "amount");
        if (!(op.value >= 0))
            throw new Exception("a counter only goes up: " ~ op.f[4]);
        break;
    default: // gauge, histogram
        op.value = numberOf(op.f[4], op.kind == "gauge" ? "value" : "seconds");
        break;
    }
    return op;
}

/// Run a script: the exposition of what it observed.
string run(const(char)[] script, Format format)
{
    // pass 1: parse, and collect what each service of the standard families uses
    Op*[] ops;
    string[][string] routes, hots, hosts;
    size_t number = 0;
    foreach (raw; script.split("\n"))
    {
        ++number;
        Op* op;
        try
            op = parseLine(number, raw);
        catch (Exception e)
            throw new ScriptError(number, e.msg);
        if (op is null)
            continue;
        ops ~= op;
        static void note(ref string[][string] m, string key, string value)
        {
            auto l = key in m;
            if (l is null)
                m[key] = [value];
            else
            {
                foreach (v; *l)
                    if (v == value)
                        return;
                *l ~= value;
            }
        }
        if (op.kind == "server")
            note(routes, op.f[0], op.f[1]);
        else if (op.kind == "hot")
            note(hots, op.f[0], op.f[1]);
        else if (op.kind == "client")
            note(hosts, op.f[0], op.f[2]);
        else if (op.kind == "stage" && op.f[0] !in hosts)
            hosts[op.f[0]] = null;
    }

    // registration, each family on its first use
    auto reg = new Registry;
    ServerRequests[string] servers;
    HotPaths[string] hotPaths;
    ClientRequests[string] clients;
    CounterSeries[Op*] counters;
    GaugeSeries[Op*] gauges;
    HistogramSeries[Op*] histograms;
    foreach (op; ops)
    {
        try
        {
            const service = op.f[0];
            switch (op.kind)
            {
            case "server":
                if (service !in servers)
                    servers[service] = reg.httpServer(service, routes[service]);
                break;
            case "hot":
                if (service !in hotPaths)
                    hotPaths[service] = reg.hotPaths(service, hots[service]);
                break;
            case "client":
            case "stage":
                if (service !in clients)
                    clients[service] = reg.httpClient(service, hosts[service]);
                break;
            case "counter":
                counters[op] = reg.counter(op.f[0], op.f[1], list(op.f[2])).labels(list(op.f[3]));
                break;
            case "gauge":
                gauges[op] = reg.gauge(op.f[0], op.f[1], list(op.f[2])).labels(list(op.f[3]));
                break;
            default:
                histograms[op] = reg.histogram(op.f[0], op.f[1], list(op.f[2])).labels(list(op.f[3]));
                break;
            }
        }
        catch (Exception e)
            throw new ScriptError(op.line, e.msg);
    }
    reg.freeze(1);
    scope (exit) reg.dispose();

    // pass 2: record
    auto shard = reg.shard(0);
    foreach (op; ops)
    {
        switch (op.kind)
        {
        case "server":
            auto s = servers[op.f[0]];
            s.observe(shard, s.route(op.f[1]), op.method, op.status, op.value);
            break;
        case "hot":
            auto h = hotPaths[op.f[0]];
            h.observe(shard, h.index(op.f[1]), op.value);
            break;
        case "client":
            auto c = clients[op.f[0]];
            c.observe(shard, c.host(op.f[2]), op.method, op.status, op.value);
            break;
        case "stage":
            clients[op.f[0]].stage(shard, cast(Stage) stageOf(op.f[1]), op.value);
            break;
        case "counter":
            counters[op].inc(shard, op.value);
            break;
        case "gauge":
            gauges[op].set(shard, op.value);
            break;
        default:
            histograms[op].observe(shard, op.value);
            break;
        }
    }
    MetricsBuffer out_;
    writeExposition(reg, out_, format);
    return out_.data.idup;
}

int main(string[] args)
{
    auto format = Format.text;
    foreach (a; args[1 .. $])
    {
        if (a == "--openmetrics")
            format = Format.openMetrics;
        else if (a == "--help" || a == "-h")
        {
            stdout.writeln("usage: conformance_driver_d [--openmetrics] < observations.tsv");
            return 0;
        }
        else
        {
            stderr.writeln("conformance_driver_d: unknown argument ", a,
                           " (usage: conformance_driver_d [--openmetrics] < script)");
            return 2;
        }
    }
    char[] script;
    foreach (chunk; stdin.byChunk(64 * 1024))
        script ~= cast(const(char)[]) chunk;
    try
    {
        const body = run(script, format);
        stdout.rawWrite(body);
        stdout.flush();
    }
    catch (ScriptError e)
    {
        stderr.writeln("conformance_driver_d: ", e.msg);
        return 1;
    }
    return 0;
}
