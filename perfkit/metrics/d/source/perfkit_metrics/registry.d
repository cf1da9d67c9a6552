/**
 * The registry: families, their series (label-value sets) and the shards they are recorded into.
 *
 * The life of a registry has two phases. At start-up (one thread, the GC allowed) families are created and
 * their series registered; each series gets a fixed slot range, and the caller keeps the handle
 * (`CounterSeries`, `GaugeSeries`, `HistogramSeries`: a slot index). `freeze(n)` then allocates `n` shards, one
 * per recording thread, plus a global one. From then on, recording is `@nogc nothrow`: a handle and a shard,
 * no lookup, no lock, no GC allocation; a scrape (`perfkit_metrics.exposition`) sums the shards.
 *
 *     auto reg = new Registry;
 *     auto jobs = reg.counter("jobs", "Jobs done", ["queue"]);
 *     auto fast = jobs.labels("fast");          // a handle, kept by the caller
 *     reg.freeze(workers);
 *     fast.inc(reg.shard(worker));              // on worker `worker`, @nogc nothrow
 *
 * Values: counters and gauges are doubles; a counter exposed is the sum over the shards, and so is a gauge (a
 * gauge per worker, e.g. its open connections, adds up to the process's). A histogram series is 19 bucket
 * counts and a sum kept in integer nanoseconds (the fast path adds two integers); its count is the sum of
 * its buckets, computed at scrape time.
 */
module perfkit_metrics.registry;

import perfkit_metrics.buckets;
import perfkit_metrics.labels : escapeHelp, escapeLabelValue, isValidLabelName, isValidMetricName;
import perfkit_metrics.shard;

enum Kind : ubyte { counter, gauge, histogram }

/// Slots per histogram series: the buckets (`+Inf` last), then the sum in nanoseconds.
enum size_t histogramSlots = bucketCount + 1;
/// Index of the nanosecond sum within a histogram series.
enum size_t histogramSumSlot = bucketCount;

/// Slots per series of a kind.
size_t slotsOf(Kind kind) @safe pure nothrow @nogc { return kind == Kind.histogram ? histogramSlots : 1; }

/// One label-value set of a family.
struct Series
{
    string labels;    /// `a="x",b="y"`: names and escaped values, without braces (empty without labels)
    size_t slot;      /// first slot in every shard
    bool showEmpty;   /// exposed before its first observation (else only once it has one)
}

/// A metric family: name, HELP, kind, label names and the series registered so far.
final class Family
{
    private string name_, help_, helpText_, helpOpenMetrics_;
    private Kind kind_;
    private immutable(string)[] labelNames_;
    private Series[] series_;
    private size_t[string] byLabels;
    private Registry registry;

    private this(Registry registry, Kind kind, string name, string help, immutable(string)[] labelNames)
    {
        this.registry = registry;
        kind_ = kind;
        name_ = name;
        help_ = help;
        helpText_ = escapeHelp(help, false);
        helpOpenMetrics_ = escapeHelp(help, true);
        labelNames_ = labelNames;
    }

const pure nothrow @nogc @safe:
    /// The family name (a counter's without `_total`).
    string name() { return name_; }
    string help() { return help_; }
    /// HELP escaped for the text format / for OpenMetrics.
    string helpText() { return helpText_; }
    string helpOpenMetrics() { return helpOpenMetrics_; }
    Kind kind() { return kind_; }
    immutable(string)[] labelNames() { return labelNames_; }
    const(Series)[] series() { return series_; }
}

/// Registers the series with these label values (one per label name, in order) and returns its first slot;
/// an existing series is returned as it is, unless `mustBeNew`.
package size_t addSeries(Family f, const(char[])[] values, bool showEmpty, bool mustBeNew = false)
{
    import std.array : appender;
    import std.conv : text;

    if (values.length != f.labelNames_.length)
        throw new Exception(text("perfkit_metrics: ", f.name_, " has ", f.labelNames_.length, " label name(s), got ",
                                 values.length, " value(s)"));
    auto key = appender!string;
    foreach (i, v; values)
    {
        if (i)
            key.put(',');
        key.put(f.labelNames_[i]);
        key.put(`="`);
        key.put(escapeLabelValue(v));
        key.put('"');
    }
    const labels = key[];
    if (auto p = labels in f.byLabels)
    {
        if (mustBeNew)
            throw new Exception(text("perfkit_metrics: ", f.name_, "{", labels, "} registered twice"));
        return f.series_[*p].slot;
    }
    const slot = f.registry.reserve(slotsOf(f.kind_));
    f.byLabels[labels] = f.series_.length;
    f.series_ ~= Series(labels, slot, showEmpty);
    return slot;
}

// ---- handles (what the recording path holds) -----------------------------------------------------------------

struct CounterSeries
{
    size_t slot;

@nogc nothrow:
    /// Add `amount` (>= 0) on the calling thread's own shard.
    pragma(inline, true) void inc(Shard* shard, double amount = 1.0) { shard.addD(slot, amount); }
    /// Add from any thread (a shared shard, e.g. `Registry.global`).
    void incAtomic(Shard* shard, double amount = 1.0) { shard.addDAtomic(slot, amount); }
    /// Set this shard's part of a counter that mirrors a monotonic source the owner thread reads (e.g. the
    /// bytes the thread allocated, from the GC).
    pragma(inline, true) void setTotal(Shard* shard, double total) { shard.setD(slot, total); }
}

struct GaugeSeries
{
    size_t slot;

@nogc nothrow:
    /// This shard's part of the gauge (a set is one store: any thread may set a shared shard).
    pragma(inline, true) void set(Shard* shard, double value) { shard.setD(slot, value); }
    /// Add (or subtract) on the calling thread's own shard.
    pragma(inline, true) void add(Shard* shard, double delta) { shard.addD(slot, delta); }
    /// Add from any thread.
    void addAtomic(Shard* shard, double delta) { shard.addDAtomic(slot, delta); }
}

struct HistogramSeries
{
    size_t slot;

@nogc nothrow:
    /// Record a duration in nanoseconds on the calling thread's own shard (the fast path).
    pragma(inline, true) void observeNs(Shard* shard, ulong ns)
    {
        shard.addU(slot + bucketOfNs(ns), 1);
        shard.addU(slot + histogramSumSlot, ns);
    }

    /// Record a duration in seconds (bucket chosen by comparing doubles, as Python does).
    void observe(Shard* shard, double seconds)
    {
        shard.addU(slot + bucketOfSeconds(seconds), 1);
        shard.addU(slot + histogramSumSlot, secondsToNs(seconds));
    }

    /// Record from any thread (locked adds).
    void observeNsAtomic(Shard* shard, ulong ns)
    {
        shard.addUAtomic(slot + bucketOfNs(ns), 1);
        shard.addUAtomic(slot + histogramSumSlot, ns);
    }
}

// ---- typed families (what start-up code holds) ---------------------------------------------------------------

/// Generic counter family: `labels(values)` registers (or finds) a series and returns its handle.
struct Counter
{
    Family family;
    CounterSeries labels(const(char[])[] values...) { return CounterSeries(addSeries(family, values, true)); }
}

struct Gauge
{
    Family family;
    GaugeSeries labels(const(char[])[] values...) { return GaugeSeries(addSeries(family, values, true)); }
}

/// Generic histogram family, with the latency buckets.
struct Histogram
{
    Family family;
    HistogramSeries labels(const(char[])[] values...) { return HistogramSeries(addSeries(family, values, true)); }
}

final class Registry
{
    private Family[] families_;
    private Family[string] byName;
    private size_t slotCount;
    private Shard*[] shards_;
    private Shard* global_;
    private bool frozen_;

    /// A counter family (get or create). `name` may end in `_total` or not: both name the same family,
    /// exposed as `name_total`.
    Counter counter(string name, string help, const(string)[] labelNames = null)
    {
        import std.algorithm.searching : endsWith;

        if (name.endsWith("_total"))
            name = name[0 .. $ - "_total".length];
        return Counter(family(Kind.counter, name, help, labelNames));
    }

    Gauge gauge(string name, string help, const(string)[] labelNames = null)
    {
        return Gauge(family(Kind.gauge, name, help, labelNames));
    }

    /// A histogram family with the latency buckets (get or create).
    Histogram histogram(string name, string help, const(string)[] labelNames = null)
    {
        return Histogram(family(Kind.histogram, name, help, labelNames));
    }

    /// Get or create a family. An existing one must have the same kind and label names (its HELP stays the
    /// one given first).
    Family family(Kind kind, string name, string help, const(string)[] labelNames)
    {
        import std.conv : text;

        if (auto f = name in byName)
        {
            if (f.kind_ != kind || f.labelNames_ != labelNames)
                throw new Exception(text("perfkit_metrics: ", name, " already exists as a ", f.kind_, " with labels ",
                                         f.labelNames_, " (asked: ", kind, " with ", labelNames, ")"));
            return *f;
        }
        if (frozen_)
            throw new Exception("perfkit_metrics: family " ~ name ~ " created after freeze()");
        if (!isValidMetricName(name))
            throw new Exception("perfkit_metrics: invalid metric name: " ~ name);
        foreach (i, l; labelNames)
        {
            if (!isValidLabelName(l))
                throw new Exception("perfkit_metrics: invalid label name for " ~ name ~ ": " ~ l);
            foreach (m; labelNames[0 .. i])
                if (m == l)
                    throw new Exception("perfkit_metrics: label " ~ l ~ " repeated in " ~ name);
        }
        auto f = new Family(this, kind, name, help, labelNames.idup);
        families_ ~= f;
        byName[name] = f;
        return f;
    }

    /// Reserve `n` slots in every shard; start-up only.
    package size_t reserve(size_t n)
    {
        if (frozen_)
            throw new Exception("perfkit_metrics: series registered after freeze()");
        const first = slotCount;
        slotCount += n;
        return first;
    }

    /// End registration: allocate one shard per recording thread (and the global shard).
    void freeze(size_t shards)
    {
        if (frozen_)
            throw new Exception("perfkit_metrics: freeze() called twice");
        if (shards == 0)
            throw new Exception("perfkit_metrics: freeze() needs at least one shard");
        foreach (i; 0 .. shards + 1)
        {
            auto s = allocateShard(slotCount);
            if (s is null)
                throw new Exception("perfkit_metrics: out of memory for the shards");
            if (i == shards)
                global_ = s;
            else
                shards_ ~= s;
        }
        frozen_ = true;
    }

    /// Free the shards (handles and shard pointers are dead afterwards); for tests and orderly exits.
    void dispose()
    {
        foreach (s; shards_)
            freeShard(s);
        freeShard(global_);
        shards_ = null;
        global_ = null;
    }

@nogc nothrow:
    bool frozen() const { return frozen_; }
    size_t shardCount() const { return shards_.length; }
    /// The shard of recording thread `i` (0 ≤ i < shardCount); only that thread records into it.
    Shard* shard(size_t i) { return shards_[i]; }
    /// The shard any thread may use with the `…Atomic` operations and gauge `set`.
    Shard* global() { return global_; }
    const(Family)[] families() const { return families_; }

    /// Σ over the shards (global one included) of an integer slot / a double slot.
    ulong sumU(size_t slot) const
    {
        ulong v = global_.loadU(slot);
        foreach (s; shards_)
            v += s.loadU(slot);
        return v;
    }

    double sumD(size_t slot) const
    {
        double v = global_.loadD(slot);
        foreach (s; shards_)
            v += s.loadD(slot);
        return v;
    }
}

unittest
{
    import std.exception : assertThrown;

    auto reg = new Registry;
    auto c = reg.counter("jobs_total", "Jobs", ["queue"]);
    assert(reg.counter("jobs", "other help", ["queue"]).family is c.family); // one family, first HELP kept
    assert(c.family.name == "jobs" && c.family.help == "Jobs");
    auto fast = c.labels("fast");
    assert(c.labels("fast") == fast);
    auto slow = c.labels("sl\"ow");
    auto g = reg.gauge("level", "Level").labels();
    auto h = reg.histogram("wait_seconds", "Wait", ["q"]).labels("a");
    assertThrown(reg.gauge("jobs", "x", ["queue"]));        // another kind
    assertThrown(reg.counter("jobs", "x", ["other"]));      // other labels
    assertThrown(c.labels("a", "b"));                       // wrong arity
    assertThrown(reg.gauge("bad-name", "x"));
    assertThrown(reg.gauge("x", "x", ["le"]));
    assertThrown(reg.gauge("x", "x", ["a", "a"]));
    assert(c.family.series[1].labels == `queue="sl\"ow"`);

    reg.freeze(2);
    scope (exit) reg.dispose();
    assertThrown(c.labels("new"));
    assertThrown(reg.counter("late", "x"));
    assert(c.labels("fast") == fast);  // an existing series is found after freeze

    fast.inc(reg.shard(0));
    fast.inc(reg.shard(1), 2);
    slow.incAtomic(reg.global, 0.5);
    g.set(reg.shard(0), 3);
    g.add(reg.shard(1), -1);
    g.addAtomic(reg.global, 0.25);
    h.observeNs(reg.shard(0), 30_000);
    h.observe(reg.shard(1), 0.000025);
    h.observeNsAtomic(reg.global, 20_000_000_000);
    assert(reg.sumD(fast.slot) == 3 && reg.sumD(slow.slot) == 0.5 && reg.sumD(g.slot) == 2.25);
    assert(reg.sumU(h.slot + 0) == 1 && reg.sumU(h.slot + 1) == 1 && reg.sumU(h.slot + boundCount) == 1);
    assert(reg.sumU(h.slot + histogramSumSlot) == 20_000_055_000);
}

unittest
{
    // recording is @nogc nothrow
    auto reg = new Registry;
    auto c = reg.counter("n", "N").labels();
    auto h = reg.histogram("h", "H").labels();
    reg.freeze(1);
    scope (exit) reg.dispose();
    static void record(Shard* s, CounterSeries c, HistogramSeries h) @nogc nothrow
    {
        c.inc(s);
        h.observeNs(s, 1);
        h.observe(s, 0.5);
    }
    record(reg.shard(0), c, h);
    assert(reg.sumD(c.slot) == 1 && reg.sumU(h.slot + histogramSumSlot) == 500_000_001);
}
