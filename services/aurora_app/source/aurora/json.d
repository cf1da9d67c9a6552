/**
 * Typed JSON output: `putJson(res, value)` writes a struct (its fields by name, in declaration order), an
 * array or slice, a string, a number, a bool or null straight into the response body, found by compile-time
 * introspection: no GC allocation, no intermediate text.
 *
 *     struct User { long id; string name; bool active; double score; }
 *     res.begin(200, "application/json");
 *     res.putJson(User(7, "ada", true, 0.5));      // {"id":7,"name":"ada","active":true,"score":0.5}
 *     res.finish();
 *
 * Floating-point numbers are written with the shortest of %.15g/%.17g that reads back the same; NaN and the
 * infinities, which JSON cannot carry, are written as null.
 */
module aurora.json;

import std.traits : isSomeString, isIntegral, isFloatingPoint, isArray, isPointer, FieldNameTuple, isBoolean,
    isSomeChar, isAssociativeArray;

import aurora.response : Response;

@nogc nothrow:

/// Write `value` as JSON into the body of `res` (between `begin` and `finish`).
void putJson(T)(ref Response res, auto ref const T value)
{
    static if (is(T == typeof(null)))
        res.put("null");
    else static if (isBoolean!T)
        res.put(value ? "true" : "false");
    else static if (isSomeChar!T)
    {
        const char[1] c = [cast(char) value];
        res.putJsonString(c[]);
    }
    else static if (isIntegral!T)
    {
        static if (__traits(isUnsigned, T))
            res.putUint(value);
        else
            res.putInt(value);
    }
    else static if (isFloatingPoint!T)
        putDouble(res, value);
    else static if (isSomeString!T)
    {
        static assert(is(typeof(value[0]) : const(char)), "JSON strings are UTF-8: " ~ T.stringof);
        if (value is null)
            res.put("null");
        else
            res.putJsonString(value);
    }
    else static if (isArray!T)
    {
        res.putChar('[');
        foreach (i, ref e; value)
        {
            if (i)
                res.putChar(',');
            putJson(res, e);
        }
        res.putChar(']');
    }
    else static if (isPointer!T)
    {
        if (value is null)
            res.put("null");
        else
            putJson(res, *value);
    }
    else static if (is(T == struct))
    {
        res.putChar('{');
        static foreach (i, name; FieldNameTuple!T)
        {
            static if (i)
                res.putChar(',');
            res.put(jsonKey!name);
            putJson(res, __traits(getMember, value, name));
        }
        res.putChar('}');
    }
    else
        static assert(false, "no JSON form for " ~ T.stringof);
}

/// `"name":` with the escapes a field name could need, made at compile time.
private template jsonKey(string name)
{
    enum jsonKey = `"` ~ name ~ `":`; // D identifiers need no escaping
}

private void putDouble(ref Response res, double v)
{
    import core.stdc.stdio : snprintf;
    import core.stdc.stdlib : strtod;

    if (v != v || v == double.infinity || v == -double.infinity)
    {
        res.put("null");
        return;
    }
    char[32] buf;
    int n = snprintf(buf.ptr, buf.length, "%.15g", v);
    if (strtod(buf.ptr, null) != v)
        n = snprintf(buf.ptr, buf.length, "%.17g", v);
    res.put(buf[0 .. n]);
}

unittest
{
    import aurora.response : Buffer;

    static struct Tag { string name; }
    static struct User
    {
        long id;
        string name;
        bool active;
        double score;
        uint[] ranks;
        Tag[2] tags;
        const(Tag)* best;
        string missing;
    }

    Buffer b;
    scope (exit) b.release();
    auto res = Response(&b, false, true);
    res.begin(200, "application/json");
    const start = b.len;
    uint[2] ranks = [3, 1];
    res.putJson(User(-7, "a\"d\na", true, 0.1, ranks[], [Tag("x"), Tag("y")], null, null));
    const body = cast(const(char)[]) b.data[start .. $];
    assert(body == `{"id":-7,"name":"a\"d\na","active":true,"score":0.1,"ranks":[3,1],`
        ~ `"tags":[{"name":"x"},{"name":"y"}],"best":null,"missing":null}`, body);
    res.finish();
    assert(res.complete);

    b.len = 0;
    res = Response(&b, false, true);
    res.begin(200, "application/json");
    const s2 = b.len;
    double[4] xs = [double.nan, 1e300, -0.5, 1.0 / 3];
    res.putJson(xs);
    assert(cast(const(char)[]) b.data[s2 .. $] == "[null,1e+300,-0.5,0.33333333333333331]");
}
