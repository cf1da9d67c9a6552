/**
 * A shard: one thread's block of metric slots (C heap, cache-line aligned, never scanned by the GC).
 *
 * Every worker thread records into its own shard, so the recording path takes no lock and no locked
 * instruction: a slot is only ever written by its owner, with a plain (relaxed atomic) load and store, which on
 * x86-64 and AArch64 is an ordinary `mov`. A scrape reads every shard with relaxed atomic loads and sums them:
 * a sample may miss the last few increments of another thread, never sees a torn value.
 *
 * A slot holds either an unsigned integer (histogram buckets, nanosecond sums) or the bits of a double
 * (counters, gauges); the family that owns the slot knows which. The `…Atomic` operations are for a shard that
 * several threads write (the registry's global shard): a locked add or a compare-and-swap loop.
 */
module perfkit_metrics.shard;

import core.atomic : atomicLoad, atomicStore, atomicOp, cas, MemoryOrder;

struct Shard
{
    private shared(ulong)* slots;
    private size_t count;

@nogc nothrow @trusted:

    @disable this(this);

    /// Number of slots.
    size_t length() const pure { return count; }

    // ---- owner thread ------------------------------------------------------------------------------------
    pragma(inline, true) void addU(size_t i, ulong delta)
    {
        assert(i < count);
        atomicStore!(MemoryOrder.raw)(slots[i], atomicLoad!(MemoryOrder.raw)(slots[i]) + delta);
    }

    pragma(inline, true) void setU(size_t i, ulong value)
    {
        assert(i < count);
        atomicStore!(MemoryOrder.raw)(slots[i], value);
    }

    pragma(inline, true) void addD(size_t i, double delta)
    {
        assert(i < count);
        atomicStore!(MemoryOrder.raw)(slots[i], toBits(fromBits(atomicLoad!(MemoryOrder.raw)(slots[i])) + delta));
    }

    /// Setting is one store: safe from any thread (the last writer wins).
    pragma(inline, true) void setD(size_t i, double value)
    {
        assert(i < count);
        atomicStore!(MemoryOrder.raw)(slots[i], toBits(value));
    }

    // ---- any thread --------------------------------------------------------------------------------------
    void addUAtomic(size_t i, ulong delta)
    {
        assert(i < count);
        atomicOp!"+="(slots[i], delta);
    }

    void addDAtomic(size_t i, double delta)
    {
        assert(i < count);
        ulong old = atomicLoad!(MemoryOrder.raw)(slots[i]);
        while (!cas(&slots[i], old, toBits(fromBits(old) + delta)))
            old = atomicLoad!(MemoryOrder.raw)(slots[i]);
    }

    ulong loadU(size_t i) const
    {
        assert(i < count);
        return atomicLoad!(MemoryOrder.raw)(slots[i]);
    }

    double loadD(size_t i) const { return fromBits(loadU(i)); }

    /// Zero every slot (tests; not while other threads record).
    void clear()
    {
        foreach (i; 0 .. count)
            atomicStore!(MemoryOrder.raw)(slots[i], 0UL);
    }
}

static assert(Shard.sizeof <= 64); // allocateShard gives it one cache line

pragma(inline, true) private ulong toBits(double d) @nogc nothrow pure @trusted { return *cast(ulong*)&d; }
pragma(inline, true) private double fromBits(ulong u) @nogc nothrow pure @trusted { return *cast(double*)&u; }

/// A zeroed shard of `slots` slots on the C heap, the shard and its slots on cache lines of their own (no
/// false sharing with another shard or anything else). Returns null when out of memory.
Shard* allocateShard(size_t slots) @nogc nothrow @trusted
{
    import core.stdc.stdlib : free;
    import core.stdc.string : memset;
    import core.sys.posix.stdlib : posix_memalign;

    void* h;
    if (posix_memalign(&h, 64, 64) != 0)
        return null;
    memset(h, 0, 64);
    auto s = cast(Shard*) h;
    const bytes = ((slots ? slots : 1) * ulong.sizeof + 63) / 64 * 64;
    void* p;
    if (posix_memalign(&p, 64, bytes) != 0)
    {
        free(s);
        return null;
    }
    memset(p, 0, bytes);
    s.slots = cast(shared(ulong)*) p;
    s.count = slots;
    return s;
}

void freeShard(Shard* s) @nogc nothrow @trusted
{
    import core.stdc.stdlib : free;

    if (s is null)
        return;
    free(cast(void*) s.slots);
    free(s);
}

unittest
{
    auto s = allocateShard(4);
    scope (exit) freeShard(s);
    assert(s.length == 4 && (cast(size_t) s.slots) % 64 == 0);
    s.addU(0, 3);
    s.addU(0, 4);
    s.addD(1, 2.5);
    s.addD(1, -1.25);
    s.setD(2, -7.5);
    s.addUAtomic(3, 5);
    s.addDAtomic(2, 0.5);
    assert(s.loadU(0) == 7 && s.loadD(1) == 1.25 && s.loadD(2) == -7.0 && s.loadU(3) == 5);
    s.clear();
    assert(s.loadU(0) == 0 && s.loadD(1) == 0.0);
}

unittest
{
    // the atomic operations from several threads lose nothing
    import core.thread : Thread;

    auto s = allocateShard(2);
    scope (exit) freeShard(s);
    Thread[] ts;
    foreach (t; 0 .. 4)
        ts ~= new Thread({
            foreach (i; 0 .. 10_000)
            {
                s.addUAtomic(0, 1);
                s.addDAtomic(1, 0.5);
            }
        }).start();
    foreach (t; ts)
        t.join();
    assert(s.loadU(0) == 40_000 && s.loadD(1) == 20_000.0);
}
