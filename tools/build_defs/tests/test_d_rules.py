"""d.bzl: d_binary links the d_library archive and runs (d_test is its own target)."""
import subprocess


def test_d_binary_runs(runfile):
    out = subprocess.run([runfile("CHECKSUM_CLI"), "abcdef"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "fletcher16(abcdef) = 0x2057"
