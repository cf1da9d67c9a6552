/**
 * One call in N (a power of two) is sampled: the calls not sampled pay one AND and one compare.
 *
 * A sampler is a plain value each recording thread keeps for itself (no sharing). The first call is sampled,
 * then every N-th: calls 1, N + 1, 2N + 1, …
 *
 *     if (sampler.next()) { const t0 = clock(); work(); hot.observeNs(shard, Hotpath.parse, clock() - t0); }
 *     else work();
 *
 * `due` and `advance` split `next` for a caller that decides up front and counts only calls that complete.
 */
module perfkit_metrics.sampler;

struct Sampler
{
    private uint mask;
    private uint n;

    /// Sample one call in `every`, a power of two (1: every call).
    this(uint every) @safe pure
    {
        if (every == 0 || (every & (every - 1)) != 0)
            throw new Exception("perfkit_metrics: sample_every must be a power of two");
        mask = every - 1;
    }

@safe pure nothrow @nogc:
    uint every() const { return mask + 1; }

    /// Whether the current call is sampled (does not count it).
    pragma(inline, true) bool due() const { return (n & mask) == 0; }

    /// Count a call.
    pragma(inline, true) void advance() { ++n; }

    /// Whether this call is sampled, and count it.
    pragma(inline, true) bool next() { return (n++ & mask) == 0; }
}

unittest
{
    import std.exception : assertThrown;

    auto s = Sampler(64);
    size_t[] sampled;
    foreach (i; 1 .. 200)
        if (s.next())
            sampled ~= i;
    assert(sampled == [1, 65, 129, 193]);
    auto t = Sampler(4);
    assert(t.due() && t.due()); // due does not count
    t.advance();
    assert(!t.due());
    foreach (i; 0 .. 3)
        t.advance();
    assert(t.due() && t.every == 4);
    auto every = Sampler(1);
    assert(every.next() && every.next());
    assertThrown(Sampler(0));
    assertThrown(Sampler(48));
}
