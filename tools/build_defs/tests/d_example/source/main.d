import std.stdio : writefln;
import example.checksum : fletcher16;

void main(string[] args)
{
    auto text = args.length > 1 ? args[1] : "abcde";
    writefln("fletcher16(%s) = 0x%04X", text, fletcher16(cast(const(ubyte)[]) text));
}
