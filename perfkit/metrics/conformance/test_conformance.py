"""Conformance: the Python, Rust and D implementations expose the same metrics for the same observations.

Every driver reads observations.tsv and writes its exposition (text 0.0.4, then OpenMetrics); the expositions are
parsed and compared value for value: the same families (type and HELP), the same series (labels, `le` strings
included) and the same values — counts exactly, sums within 1 µs (D keeps nanoseconds). The drivers come from the
environment (PM_DRIVER_RUST, PM_DRIVER_D: executables; Python runs in process); under Bazel all three must be
there. Spot checks against SPEC.md guard against the three agreeing on a wrong answer.
"""
from __future__ import annotations

import io
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # driver.py, next to this file

import driver  # noqa: E402
from perfkit_metrics import Registry  # noqa: E402

SCRIPT = (HERE / "observations.tsv").read_text()
SPEC_LE = ["2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
           "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"]
SUM_TOLERANCE = 1e-6


def _driver_path(var: str) -> str | None:
    value = os.environ.get(var)
    if not value:
        return None
    path = Path(value)
    if not path.is_absolute() and os.environ.get("TEST_SRCDIR"):
        path = Path(os.environ["TEST_SRCDIR"]) / os.environ["TEST_WORKSPACE"] / value
    return str(path)


def python_exposition(openmetrics: bool) -> str:
    registry = Registry()
    driver.run(io.StringIO(SCRIPT), registry)
    body, _ = registry.exposition("application/openmetrics-text; version=1.0.0" if openmetrics else None)
    return body.decode()


def executable_exposition(path: str, openmetrics: bool) -> str:
    args = [path] + (["--openmetrics"] if openmetrics else [])
    done = subprocess.run(args, input=SCRIPT.encode(), capture_output=True, timeout=60)
    assert done.returncode == 0, f"{path} failed: {done.stderr.decode(errors='replace')}"
    return done.stdout.decode()


def expositions(openmetrics: bool) -> dict[str, str]:
    out = {"python": python_exposition(openmetrics)}
    for lang, var in (("rust", "PM_DRIVER_RUST"), ("d", "PM_DRIVER_D")):
        path = _driver_path(var)
        if path:
            out[lang] = executable_exposition(path, openmetrics)
        elif os.environ.get("TEST_SRCDIR"):
            pytest.fail(f"{var} is not set: the {lang} driver must take part under Bazel")
    return out


def digest(text: str, openmetrics: bool) -> tuple[dict, dict]:
    """(families: name -> (type, help), samples: (sample name, sorted labels) -> value)."""
    families, samples = {}, {}
    for fam in (parse_openmetrics if openmetrics else parse_text)(text):
        families[fam.name] = (fam.type, fam.documentation)
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, f"series written twice: {key}"
            samples[key] = s.value
    return families, samples


def differences(reference: tuple[dict, dict], other: tuple[dict, dict]) -> list[str]:
    (ref_fams, ref_samples), (fams, samples) = reference, other
    out = [f"family {n}: {ref_fams.get(n)} != {fams.get(n)}" for n in sorted(set(ref_fams) | set(fams))
           if ref_fams.get(n) != fams.get(n)]
    for key in sorted(set(ref_samples) | set(samples)):
        a, b = ref_samples.get(key), samples.get(key)
        if a is None or b is None:
            out.append(f"series {key}: only in {'the other' if a is None else 'the reference'}")
        elif key[0].endswith("_sum") and math.isclose(a, b, rel_tol=1e-9, abs_tol=SUM_TOLERANCE):
            continue
        elif a != b:
            out.append(f"series {key}: {a} != {b}")
    return out


@pytest.mark.parametrize("openmetrics", [False, True], ids=["text", "openmetrics"])
def test_every_implementation_exposes_the_same_values(openmetrics):
    texts = expositions(openmetrics)
    reference = digest(texts["python"], openmetrics)
    failures = []
    for lang, text in texts.items():
        if openmetrics:
            assert text.rstrip().endswith("# EOF"), f"{lang}: OpenMetrics must end with # EOF"
        diff = differences(reference, digest(text, openmetrics))
        failures += [f"{lang}: {d}" for d in diff[:25]]
    assert not failures, "expositions differ from Python's:\n" + "\n".join(failures)


def _series(samples: dict, name: str, **labels) -> dict:
    """The bucket counts (by le) of one histogram series."""
    want = tuple(sorted(labels.items()))
    return {dict(k[1])["le"]: v for k, v in samples.items()
            if k[0] == name + "_bucket" and tuple(sorted((a, b) for a, b in k[1] if a != "le")) == want}


def test_the_reference_keeps_spec_md():
    _, samples = digest(python_exposition(False), False)
    items = _series(samples, "http_server_request_duration_seconds",
                    service="svc_a", route="/items/{id}", method="GET", status_class="2xx")
    assert list(items) == SPEC_LE
    # observations.tsv: 0, 1e-7 and 0.000025 (a bound is inclusive) in the first bucket; 10 in le=10; 2 above it
    assert items["2.5e-05"] == 3 and items["5e-05"] == 5 and items["10.0"] == 21 and items["+Inf"] == 23
    counts = [items[le] for le in SPEC_LE]
    assert counts == sorted(counts), "buckets are cumulative"
    methods = {dict(k[1])["method"] for k in samples if k[0] == "http_server_request_duration_seconds_count"}
    assert "OTHER" in methods and "get" not in methods and "PROPFIND" not in methods
    classes = {dict(k[1])["status_class"] for k in samples if k[0].endswith("_count")
               and "status_class" in dict(k[1])}
    assert classes == {"1xx", "2xx", "3xx", "4xx", "5xx", "error", "other"}
    assert samples[("demo_events_total", (("kind", "a"), ("zone", "eu")))] == 5
    assert samples[("demo_level", (("zone", "eu"),))] == -1.25


def test_a_planted_bucket_change_is_caught():
    text = python_exposition(False)
    planted = text.replace('le="0.005"', 'le="0.006"')
    assert planted != text
    diff = differences(digest(text, False), digest(planted, False))
    assert any("0.006" in d for d in diff) and any("0.005" in d for d in diff)


def test_a_malformed_line_is_refused():
    with pytest.raises(SystemExit, match="line 1"):
        driver.run(io.StringIO("server\tsvc\t/\tGET\tnot-a-status\t0.1\n"), Registry())
