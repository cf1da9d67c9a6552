"""requestx_client against requests' own test suite: how many of requests' tests pass with each.

    tools/bazel test //services/requestx_client:requests_suite --test_output=all      # manual target
    python services/requestx_client/compat/run_requests_suite.py --tests-dir <requests sdist>/tests

requests' tests/ folder (from its sdist, fetched by @requests_sdist with a hash) is copied to a temporary
folder, and pytest runs SUITE_FILES there twice, each in its own process:

- `requests`: the real requests of the lock;
- `requestx_client`: `requests` and its submodules bound to requestx_client by `_rx_bind.py` (a pytest
  plugin loaded before the suite is collected). Submodules requestx_client lacks are stub modules, and
  names the suite imports from a module that lacks them are stubs too: each raises when it is used, so
  only the tests that use it fail (not the whole file at import).

The servers are loopback only: pytest-httpbin on 127.0.0.1 (plain and TLS) and requests' own socket
servers. The one change to the suite's files is in its conftest.py, which is test infrastructure:
`from requests.compat import urljoin` becomes `from urllib.parse import urljoin` (what requests.compat
re-exports), so the httpbin fixture does not depend on the client under test. OUT_OF_SCOPE tests are
deselected in both runs.

Output: one JSON line (`{"requests_passed": ..., "requestx_client_passed": ..., "ratio": ...}`), then a
table of the biggest failure groups of the requestx_client run (exception type and the start of its
message). Exit 0 whenever both runs happened: the ratio is a figure, not a gate.
"""
import argparse
import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

SUITE_FILES = ["test_requests.py", "test_lowlevel.py", "test_structures.py", "test_hooks.py"]

# node id prefix (relative to tests/) -> why it is not a measure of requestx_client. Deselected in both runs.
OUT_OF_SCOPE = {
    # both wait for a connect to the non-routable 10.255.255.1 to time out; without a network (the test
    # sandbox has loopback only) the connect fails at once, for requests too
    "test_requests.py::TestTimeout::test_connect_timeout": "needs a route to 10.255.255.1 (no network)",
    "test_requests.py::TestTimeout::test_total_timeout_connect": "needs a route to 10.255.255.1 (no network)",
}

HERE = pathlib.Path(__file__).resolve().parent


def find_tests_dir(given):
    if given:
        return pathlib.Path(given)
    roots = [os.environ.get("RUNFILES_DIR"), os.environ.get("TEST_SRCDIR")]
    roots += [str(pathlib.Path(sys.argv[0]).resolve()) + ".runfiles"]
    for root in filter(None, roots):
        for cand in (pathlib.Path(root) / "requests_sdist" / "tests", pathlib.Path(root) / "external" / "requests_sdist" / "tests"):
            if (cand / "test_requests.py").is_file():
                return cand
    sys.exit("run_requests_suite: requests' tests/ not found; pass --tests-dir")


def prepare(src, dest):
    shutil.copytree(src, dest / "tests", symlinks=False)
    # three tests upload the sdist's requirements-dev.txt from the working folder
    dev = src.parent / "requirements-dev.txt"
    if dev.is_file():
        shutil.copy(dev, dest / "requirements-dev.txt")
    conftest = dest / "tests" / "conftest.py"
    text = conftest.read_text()
    patched = text.replace("from requests.compat import urljoin", "from urllib.parse import urljoin")
    if patched == text:
        print("run_requests_suite: conftest.py has no `from requests.compat import urljoin`; left as is", file=sys.stderr)
    conftest.write_text(patched)
    (dest / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")


def run(label, work, bind, timeout):
    xml = work / ("%s.xml" % label)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rN", "--tb=no", "-o", "junit_family=xunit2",
           "--junitxml", str(xml)]
    env = dict(os.environ)
    if bind:
        cmd += ["-p", "_rx_bind"]
        env["PYTHONPATH"] = os.pathsep.join([str(HERE)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    for node in OUT_OF_SCOPE:
        cmd += ["--deselect", "tests/" + node]
    cmd += ["tests/" + f for f in SUITE_FILES]
    # no proxies from the environment: every server is on loopback
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env.pop(var, None)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        tail = (proc.stdout + proc.stderr)[-1500:]
        rc = proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        tail, rc = out[-1500:] + "\n(timed out after %ds)" % timeout, None
    secs = time.monotonic() - t0
    if not xml.is_file():
        print("run_requests_suite: the %s run produced no report (rc=%s):\n%s" % (label, rc, tail), file=sys.stderr)
        return None
    return parse(xml, secs, rc)


def parse(xml, secs, rc):
    res = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "seconds": round(secs, 1), "rc": rc,
           "failures": {}}
    for case in ET.parse(xml).getroot().iter("testcase"):
        node = "%s::%s" % (case.get("classname", ""), case.get("name", ""))
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            res["errors" if bad.tag == "error" else "failed"] += 1
            res["failures"][node] = (bad.get("message") or bad.text or "").strip()
        elif case.find("skipped") is not None:
            res["skipped"] += 1
        else:
            res["passed"] += 1
    return res


_ADDR = re.compile(r"0x[0-9a-f]+|127\.0\.0\.1:\d+|localhost:\d+|:\d{4,5}\b|'[^']{25,}'|\"[^\"]{25,}\"")


def reason(message):
    """The group of a failure: its exception type and the start of its message, without addresses/ports."""
    first = message.splitlines()[0] if message else "(no message)"
    first = _ADDR.sub("…", first)
    return first[:90]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests-dir", help="requests' tests/ folder (default: @requests_sdist in the runfiles)")
    ap.add_argument("--timeout", type=int, default=1500, help="seconds per run")
    ap.add_argument("--top", type=int, default=15, help="failure groups to list")
    ap.add_argument("--json-out", help="also write the full result (every failing test) here")
    args = ap.parse_args()
    src = find_tests_dir(args.tests_dir)
    with tempfile.TemporaryDirectory(prefix="requests_suite_") as tmp:
        work = pathlib.Path(tmp)
        prepare(src, work)
        real = run("requests", work, bind=False, timeout=args.timeout)
        rx = run("requestx_client", work, bind=True, timeout=args.timeout)
    if real is None or rx is None:
        return 1
    summary = {
        "suite": SUITE_FILES,
        "requests_passed": real["passed"],
        "requestx_client_passed": rx["passed"],
        "ratio": round(rx["passed"] / real["passed"], 4) if real["passed"] else None,
        "requests": {k: v for k, v in real.items() if k != "failures"},
        "requestx_client": {k: v for k, v in rx.items() if k != "failures"},
        "out_of_scope": len(OUT_OF_SCOPE),
    }
    print(json.dumps(summary, sort_keys=True))
    # failures of requestx_client on tests real requests passes
    lost = {n: m for n, m in rx["failures"].items() if n not in real["failures"]}
    groups = collections.Counter(reason(m) for m in lost.values())
    print("\n%d tests pass with requests and fail with requestx_client; biggest groups:" % len(lost))
    print("%6s  %s" % ("tests", "exception: message prefix"))
    for text, n in groups.most_common(args.top):
        print("%6d  %s" % (n, text))
    stubs = collections.Counter()
    for m in lost.values():
        hit = re.search(r"requestx_client has no (\S+)", m)
        if hit:
            stubs[hit.group(1)] += 1
    if stubs:
        print("\n%d of them stop on a name requestx_client lacks (a stub): %s" % (
            sum(stubs.values()), ", ".join("%s %d" % kv for kv in stubs.most_common())))
    if real["failures"]:
        print("\nfailing with real requests too (%d): %s" % (len(real["failures"]), ", ".join(sorted(real["failures"]))[:2000]))
    out = args.json_out or (os.path.join(os.environ["TEST_UNDECLARED_OUTPUTS_DIR"], "requests_suite.json")
                            if os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") else None)
    if out:
        with open(out, "w") as f:
            json.dump({**summary, "lost": lost, "requests_failures": real["failures"]}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
