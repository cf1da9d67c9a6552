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

// ------------------------------------------------------------------ reading

/// Where and why `readJson` failed.
struct JsonError
{
    string message;   /// null: no error
    size_t offset;    /// byte of the input where it was found

    bool opCast(T : bool)() const { return message !is null; }
}

/// Nesting deeper than this is refused (a hostile body cannot exhaust the stack).
enum maxJsonDepth = 32;

/**
 * Read the JSON document `text` into `value`, by its type: a struct takes an object (fields by name, unknown
 * members skipped, absent ones keep their values), a fixed-size array an array of exactly its length, a
 * `const(char)[]` a string (a slice of `text` when it has no escapes, else decoded into `room`), integers
 * (range-checked), floating point, bool; `null` leaves a field as it was. No GC allocation. The error says what
 * was expected and where; the whole text must be one value (whitespace around it is fine).
 */
JsonError readJson(T)(const(char)[] text, ref T value, char[] room)
{
    auto r = JsonReader(text, room);
    r.skipSpace();
    if (!r.read(value, 0))
        return JsonError(r.error, r.pos);
    r.skipSpace();
    if (r.pos != text.length)
        return JsonError("unexpected data after the JSON value", r.pos);
    return JsonError.init;
}

private struct JsonReader
{
@nogc nothrow:
    const(char)[] s;
    char[] room;
    size_t pos, used;
    string error;

    bool fail(string why) { error = why; return false; }

    void skipSpace()
    {
        while (pos < s.length && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r'))
            pos++;
    }

    bool literal(string word)
    {
        if (s.length - pos < word.length || s[pos .. pos + word.length] != word)
            return false;
        pos += word.length;
        return true;
    }

    bool read(T)(ref T v, int depth)
    {
        if (depth > maxJsonDepth)
            return fail("JSON nested too deeply");
        if (literal("null"))
            return true;
        static if (isBoolean!T)
        {
            if (literal("true")) { v = true; return true; }
            if (literal("false")) { v = false; return true; }
            return fail("expected true or false");
        }
        else static if (isIntegral!T)
        {
            long n;
            if (!readInteger(n) || n < T.min || (n > 0 && cast(ulong) n > T.max))
                return error ? false : fail("expected an integer in range");
            v = cast(T) n;
            return true;
        }
        else static if (isFloatingPoint!T)
        {
            double d;
            if (!readFloat(d))
                return false;
            v = d;
            return true;
        }
        else static if (is(T == const(char)[]))
            return readString(v);
        else static if (is(T == E[n], E, size_t n))
        {
            import std.conv : text;

            enum wrongLength = "expected an array of " ~ text(n) ~ " items";
            if (!consume('['))
                return fail("expected an array");
            foreach (i; 0 .. n)
            {
                skipSpace();
                if (i && !consume(','))
                    return fail(wrongLength);
                skipSpace();
                if (!read(v[i], depth + 1))
                    return false;
            }
            skipSpace();
            return consume(']') ? true : fail(wrongLength);
        }
        else static if (is(T == struct))
            return readObject(v, depth);
        else
            static assert(false, "no JSON reading for " ~ T.stringof);
    }

    bool consume(char c)
    {
        if (pos < s.length && s[pos] == c)
        {
            pos++;
            return true;
        }
        return false;
    }

    bool readObject(T)(ref T v, int depth)
    {
        if (!consume('{'))
            return fail("expected an object");
        skipSpace();
        if (consume('}'))
            return true;
        for (;;)
        {
            skipSpace();
            const(char)[] key;
            if (!readString(key))
                return false;
            skipSpace();
            if (!consume(':'))
                return fail("expected ':'");
            skipSpace();
            bool known = false;
            static foreach (name; FieldNameTuple!T)
                if (!known && key == name)
                {
                    known = true;
                    if (!read(__traits(getMember, v, name), depth + 1))
                        return false;
                }
            if (!known && !skipValue(depth + 1))
                return false;
            skipSpace();
            if (consume('}'))
                return true;
            if (!consume(','))
                return fail("expected ',' or '}'");
        }
    }

    /// Step over any value (an unknown member's).
    bool skipValue(int depth)
    {
        if (depth > maxJsonDepth)
            return fail("JSON nested too deeply");
        if (pos >= s.length)
            return fail("unexpected end of the JSON text");
        const c = s[pos];
        if (c == '"')
        {
            const(char)[] ignored;
            return readString(ignored);
        }
        if (c == '{' || c == '[')
        {
            const close = c == '{' ? '}' : ']';
            pos++;
            skipSpace();
            if (consume(close))
                return true;
            for (;;)
            {
                skipSpace();
                if (c == '{')
                {
                    const(char)[] key;
                    if (!readString(key))
                        return false;
                    skipSpace();
                    if (!consume(':'))
                        return fail("expected ':'");
                    skipSpace();
                }
                if (!skipValue(depth + 1))
                    return false;
                skipSpace();
                if (consume(close))
                    return true;
                if (!consume(','))
                    return fail(c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
        if (literal("true") || literal("false") || literal("null"))
            return true;
        double ignored;
        return readFloat(ignored);
    }

    /// The extent of a JSON number at `pos` (RFC 8259 §6 grammar); false when there is none.
    bool numberSpan(out size_t end, out bool integral)
    {
        size_t i = pos;
        integral = true;
        if (i < s.length && s[i] == '-')
            i++;
        if (i >= s.length || s[i] < '0' || s[i] > '9')
            return fail("expected a number");
        if (s[i] == '0')
            i++;
        else
            while (i < s.length && s[i] >= '0' && s[i] <= '9')
                i++;
        if (i < s.length && s[i] == '.')
        {
            integral = false;
            i++;
            const d = i;
            while (i < s.length && s[i] >= '0' && s[i] <= '9')
                i++;
            if (i == d)
                return fail("expected digits after '.'");
        }
        if (i < s.length && (s[i] == 'e' || s[i] == 'E'))
        {
            integral = false;
            i++;
            if (i < s.length && (s[i] == '+' || s[i] == '-'))
                i++;
            const d = i;
            while (i < s.length && s[i] >= '0' && s[i] <= '9')
                i++;
            if (i == d)
                return fail("expected digits in the exponent");
        }
        end = i;
        return true;
    }

    bool readInteger(out long n)
    {
        import aurora.router : parseLong;

        size_t end;
        bool integral;
        if (!numberSpan(end, integral))
            return false;
        if (!integral || !parseLong(s[pos .. end], true, n))
            return fail("expected an integer in range");
        pos = end;
        return true;
    }

    bool readFloat(out double d)
    {
        import core.stdc.stdlib : strtod;

        size_t end;
        bool integral;
        if (!numberSpan(end, integral))
            return false;
        char[64] z;
        if (end - pos >= z.length)
            return fail("number too long");
        z[0 .. end - pos] = s[pos .. end];
        z[end - pos] = 0;
        d = strtod(z.ptr, null);
        pos = end;
        return true;
    }

    /// A string: a slice of the input when it has no escapes, else decoded into the room.
    bool readString(T)(ref T v)
    {
        if (!consume('"'))
            return fail("expected a string");
        const start = pos;
        while (pos < s.length && s[pos] != '"' && s[pos] != '\\')
        {
            if (cast(ubyte) s[pos] < 0x20)
                return fail("control character in a string");
            pos++;
        }
        if (pos >= s.length)
            return fail("unterminated string");
        if (s[pos] == '"')
        {
            v = s[start .. pos++];
            return true;
        }
        const from = used;
        if (!put(s[start .. pos]))
            return false;
        while (pos < s.length && s[pos] != '"')
        {
            const c = s[pos];
            if (cast(ubyte) c < 0x20)
                return fail("control character in a string");
            if (c != '\\')
            {
                if (!put(s[pos .. pos + 1]))
                    return false;
                pos++;
                continue;
            }
            if (!escape())
                return false;
        }
        if (!consume('"'))
            return fail("unterminated string");
        v = room[from .. used];
        return true;
    }

    bool put(const(char)[] part)
    {
        if (used + part.length > room.length)
            return fail("strings with escapes need more room than given");
        room[used .. used + part.length] = part[];
        used += part.length;
        return true;
    }

    /// One escape at `pos` (a backslash) decoded into the room; \uXXXX (and surrogate pairs) as UTF-8.
    bool escape()
    {
        if (pos + 1 >= s.length)
            return fail("unterminated string");
        const e = s[pos + 1];
        pos += 2;
        char one;
        switch (e)
        {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u':
            dchar cp;
            if (!hex4(cp))
                return false;
            if (cp >= 0xD800 && cp <= 0xDBFF)
            {
                dchar low;
                if (!literal("\\u") || !hex4(low) || low < 0xDC00 || low > 0xDFFF)
                    return fail("unpaired surrogate in a string");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            else if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail("unpaired surrogate in a string");
            char[4] u;
            return put(u[0 .. utf8(cp, u)]);
        default:
            return fail("invalid escape in a string");
        }
        const char[1] c = [one];
        return put(c[]);
    }

    bool hex4(out dchar cp)
    {
        if (s.length - pos < 4)
            return fail("expected four hex digits after \\u");
        uint v = 0;
        foreach (c; s[pos .. pos + 4])
        {
            const l = c | 0x20;
            const d = c >= '0' && c <= '9' ? c - '0' : l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
            if (d < 0)
                return fail("expected four hex digits after \\u");
            v = v * 16 + d;
        }
        pos += 4;
        cp = v;
        return true;
    }
}

private size_t utf8(dchar c, ref char[4] o) @nogc nothrow pure
{
    if (c < 0x80) { o[0] = cast(char) c; return 1; }
    if (c < 0x800) { o[0] = cast(char)(0xC0 | c >> 6); o[1] = cast(char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000)
    {
        o[0] = cast(char)(0xE0 | c >> 12);
        o[1] = cast(char)(0x80 | (c >> 6 & 0x3F));
        o[2] = cast(char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = cast(char)(0xF0 | c >> 18);
    o[1] = cast(char)(0x80 | (c >> 12 & 0x3F));
    o[2] = cast(char)(0x80 | (c >> 6 & 0x3F));
    o[3] = cast(char)(0x80 | (c & 0x3F));
    return 4;
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

unittest
{   // reading: typed fields, skipping, escapes, errors with offsets
    import std.array : replicate;

    static struct Inner { int x; }
    static struct Doc
    {
        long id;
        const(char)[] name;
        bool active;
        double score;
        ubyte small;
        Inner inner;
        int[3] triple;
    }

    char[64] room;
    Doc d;
    enum text = ` { "id": -12, "name": "a\"b\u00e9\ud83d\ude00", "extra": {"deep": [1, {"x": null}, "s"]},`
        ~ ` "active": true, "score": 2.5e1, "small": 255, "inner": {"x": 7}, "triple": [1,2,3] } `;
    auto e = readJson(text, d, room);
    assert(!e, e.message);
    assert(d.id == -12 && d.name == "a\"b\u00e9\U0001F600" && d.active && d.score == 25 && d.small == 255);
    assert(d.inner.x == 7 && d.triple == [1, 2, 3]);

    Doc plain;
    assert(!readJson(`{"name":"plain"}`, plain, room) && plain.name.ptr !is null && plain.id == 0);

    static immutable bad = [
        `{"id": 1.5}`, `{"id": 99999999999999999999}`, `{"small": 256}`, `{"small": -1}`, `{"id": }`,
        `{"name": "x}`, `{"name": "\x"}`, `{"name": "\ud800"}`, `{"active": 1}`, `{"triple": [1,2]}`,
        `{"id": 1,}`, `{"id": 1} x`, `[1]`, `{"score": 01}`, `{"name": "a	b"}`, ``, `{"id": -}`,
        `{"x":` ~ "[".replicate(40) ~ "]".replicate(40) ~ `}`,
    ];
    foreach (b; bad)
    {
        Doc x;
        assert(readJson(b, x, room), b);
    }
    char[2] tiny;
    Doc y;
    const err = readJson(`{"name": "\n\n\n"}`, y, tiny);
    assert(err && err.message == "strings with escapes need more room than given" && err.offset > 0);
}
