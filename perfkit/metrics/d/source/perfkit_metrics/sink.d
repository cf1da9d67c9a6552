/**
 * `MetricsBuffer`: a growable byte buffer on the C heap, the sink a service without a buffer of its own can
 * write an exposition into (`perfkit_metrics.exposition.writeExposition` takes any type with
 * `put(const(char)[])`, e.g. a response builder that writes into the connection's buffer).
 */
module perfkit_metrics.sink;

struct MetricsBuffer
{
    private char* ptr;
    private size_t len, cap;
    /// An allocation failed: the contents are incomplete.
    bool failed;

@nogc nothrow:
    @disable this(this);

    void put(scope const(char)[] s) @trusted
    {
        import core.stdc.stdlib : realloc;
        import core.stdc.string : memcpy;

        if (failed)
            return;
        if (len + s.length > cap)
        {
            size_t n = cap ? cap * 2 : 16 * 1024;
            while (n < len + s.length)
                n *= 2;
            auto p = cast(char*) realloc(ptr, n);
            if (p is null)
            {
                failed = true;
                return;
            }
            ptr = p;
            cap = n;
        }
        memcpy(ptr + len, s.ptr, s.length);
        len += s.length;
    }

    /// The bytes written so far (valid until the next `put`, `clear` or `release`).
    const(char)[] data() const @trusted return { return ptr[0 .. len]; }

    /// Empty, keeping the memory.
    void clear() { len = 0; failed = false; }

    /// Empty, giving the memory back.
    void release() @trusted
    {
        import core.stdc.stdlib : free;

        free(ptr);
        ptr = null;
        len = cap = 0;
        failed = false;
    }

    ~this() { release(); }
}

unittest
{
    MetricsBuffer b;
    b.put("abc");
    foreach (i; 0 .. 10_000)
        b.put("0123456789");
    assert(b.data.length == 100_003 && b.data[0 .. 5] == "abc01" && !b.failed);
    b.clear();
    assert(b.data.length == 0);
    b.put("x");
    assert(b.data == "x");
}
