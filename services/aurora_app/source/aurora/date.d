/**
 * The `Date:` header line, rendered at most once a second per thread.
 */
module aurora.date;

import core.sys.posix.time : time_t, tm, gmtime_r;
import core.sys.linux.time : clock_gettime, timespec, CLOCK_REALTIME_COARSE;

@nogc nothrow:

private immutable char[3][7] dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
private immutable char[3][12] monthNames =
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" is always this long.
enum dateLineLength = 37;

private char[dateLineLength] cachedLine;
private time_t cachedSecond = -1;

/// Render the Date line for the given UNIX time into `buf`.
void renderDateLine(time_t t, ref char[dateLineLength] buf)
{
    tm g;
    gmtime_r(&t, &g);
    buf[0 .. 6] = "Date: ";
    buf[6 .. 9] = dayNames[g.tm_wday];
    buf[9 .. 11] = ", ";
    two(buf[11 .. 13], g.tm_mday);
    buf[13] = ' ';
    buf[14 .. 17] = monthNames[g.tm_mon];
    buf[17] = ' ';
    const y = g.tm_year + 1900;
    buf[18] = cast(char)('0' + y / 1000 % 10);
    buf[19] = cast(char)('0' + y / 100 % 10);
    buf[20] = cast(char)('0' + y / 10 % 10);
    buf[21] = cast(char)('0' + y % 10);
    buf[22] = ' ';
    two(buf[23 .. 25], g.tm_hour);
    buf[25] = ':';
    two(buf[26 .. 28], g.tm_min);
    buf[28] = ':';
    two(buf[29 .. 31], g.tm_sec);
    buf[31 .. 37] = " GMT\r\n";
}

private void two(char[] o, int v)
{
    o[0] = cast(char)('0' + v / 10);
    o[1] = cast(char)('0' + v % 10);
}

/// Re-render the cached line if the second changed; cheap (vDSO clock).
void refreshDate()
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != cachedSecond)
    {
        renderDateLine(ts.tv_sec, cachedLine);
        cachedSecond = ts.tv_sec;
    }
}

/// The current thread's cached Date line (call `refreshDate` first).
const(char)[] dateLine()
{
    if (cachedSecond < 0)
        refreshDate();
    return cachedLine[];
}

unittest
{
    char[dateLineLength] b;
    renderDateLine(784111777, b); // RFC 9110's example instant
    assert(b[] == "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
    renderDateLine(0, b);
    assert(b[] == "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n");
}
