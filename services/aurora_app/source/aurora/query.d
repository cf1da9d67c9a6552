/**
 * Query strings (`application/x-www-form-urlencoded`: `a=1&b=x+y&c=%2F`), read without allocation: pairs are
 * walked in place and a value is percent-decoded ('+' is a space) into a buffer the caller gives.
 *
 *     char[256] room;
 *     const id = queryValue(req.query, "id", room);   // null when absent or malformed
 */
module aurora.query;

@nogc nothrow:

/// One `name=value` pair as sent (not decoded); a pair without '=' has an empty value.
struct QueryPair
{
    const(char)[] name;
    const(char)[] value;
}

/// The pairs of a query string, in order; empty pairs (`a=1&&b=2`) are skipped.
struct QueryPairs
{
@nogc nothrow:
    private const(char)[] rest;
    private QueryPair current;
    private bool atEnd;

    this(const(char)[] query)
    {
        rest = query;
        popFront();
    }

    bool empty() const { return atEnd; }
    QueryPair front() const { return current; }

    void popFront()
    {
        while (rest.length)
        {
            size_t amp = 0;
            while (amp < rest.length && rest[amp] != '&')
                amp++;
            const pair = rest[0 .. amp];
            rest = amp < rest.length ? rest[amp + 1 .. $] : rest[$ .. $];
            if (pair.length == 0)
                continue;
            size_t eq = 0;
            while (eq < pair.length && pair[eq] != '=')
                eq++;
            current = QueryPair(pair[0 .. eq], eq < pair.length ? pair[eq + 1 .. $] : pair[$ .. $]);
            return;
        }
        atEnd = true;
    }
}

/// The pairs of `query`.
QueryPairs queryPairs(const(char)[] query) { return QueryPairs(query); }

/// The first value of `name` in `query`, decoded into `room`; null when there is none, or it is malformed or
/// longer than `room`. A name is compared decoded.
const(char)[] queryValue(const(char)[] query, const(char)[] name, return scope char[] room)
{
    foreach (pair; queryPairs(query))
        if (decodedEquals(pair.name, name))
            return formDecode(pair.value, room);
    return null;
}

/// Whether `query` has the name `name` (with or without a value).
bool queryHas(const(char)[] query, const(char)[] name)
{
    foreach (pair; queryPairs(query))
        if (decodedEquals(pair.name, name))
            return true;
    return false;
}

/// `raw` decoded into `room` ('+' → space, %XX → byte); null when an escape is malformed or `room` is too small.
const(char)[] formDecode(const(char)[] raw, return scope char[] room)
{
    size_t n = 0;
    size_t i = 0;
    while (i < raw.length)
    {
        if (n == room.length)
            return null;
        const c = raw[i];
        if (c == '%')
        {
            if (i + 2 >= raw.length)
                return null;
            const hi = hexDigit(raw[i + 1]), lo = hexDigit(raw[i + 2]);
            if (hi < 0 || lo < 0)
                return null;
            room[n++] = cast(char)(hi * 16 + lo);
            i += 3;
        }
        else
        {
            room[n++] = c == '+' ? ' ' : c;
            i++;
        }
    }
    return room[0 .. n];
}

/// Whether `raw` decodes to exactly `plain` (no room needed).
private bool decodedEquals(const(char)[] raw, const(char)[] plain)
{
    size_t i = 0, j = 0;
    while (i < raw.length)
    {
        char c = raw[i];
        if (c == '%')
        {
            if (i + 2 >= raw.length)
                return false;
            const hi = hexDigit(raw[i + 1]), lo = hexDigit(raw[i + 2]);
            if (hi < 0 || lo < 0)
                return false;
            c = cast(char)(hi * 16 + lo);
            i += 3;
        }
        else
        {
            c = c == '+' ? ' ' : c;
            i++;
        }
        if (j == plain.length || plain[j++] != c)
            return false;
    }
    return j == plain.length;
}

private int hexDigit(char c) pure
{
    if (c >= '0' && c <= '9')
        return c - '0';
    const l = c | 0x20;
    return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
}

unittest
{
    char[32] room;
    enum q = "id=42&name=a+b%2Fc&flag&empty=&&x%20y=1&id=7";
    assert(queryValue(q, "id", room) == "42");          // the first of repeated names
    assert(queryValue(q, "name", room) == "a b/c");
    assert(queryValue(q, "flag", room) == "" && queryValue(q, "flag", room) !is null);
    assert(queryValue(q, "empty", room) == "");
    assert(queryValue(q, "x y", room) == "1");            // names compare decoded
    assert(queryValue(q, "missing", room) is null && !queryHas(q, "missing") && queryHas(q, "flag"));
    assert(queryValue("a=%zz", "a", room) is null && queryValue("a=%4", "a", room) is null);
    assert(queryValue("a=%", "a", room) is null && queryValue("a=%41", "a", room) == "A");
    char[2] small;
    assert(queryValue("a=abc", "a", small) is null);
    size_t n;
    foreach (p; queryPairs(q))
        n++;
    assert(n == 6);
    assert(queryPairs("").empty && queryPairs("&&").empty);
}
