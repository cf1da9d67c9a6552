/// Exercises the D rules: a library module with unittest blocks, compiled -O -release into a
/// static archive for the binary, and again with -unittest for the test.
module example.checksum;

/// Fletcher-16 checksum of `data`; @nogc so the rules' -release build is checked to keep it so.
ushort fletcher16(const(ubyte)[] data) @nogc nothrow pure @safe
{
    uint a = 0, b = 0;
    foreach (x; data)
    {
        a = (a + x) % 255;
        b = (b + a) % 255;
    }
    return cast(ushort)((b << 8) | a);
}

unittest
{
    assert(fletcher16(cast(const(ubyte)[]) "abcde") == 0xC8F0);
    assert(fletcher16(cast(const(ubyte)[]) "abcdef") == 0x2057);
    assert(fletcher16(null) == 0);
}
