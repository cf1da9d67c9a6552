"""pip.bzl and python.bzl: locked wheels as py_libraries, pytest under Bazel, no import leaks."""
import importlib
import os
import sys

import pytest


def test_declared_requirement_imports_from_the_lock():
    import orjson

    assert orjson.loads(orjson.dumps({"a": [1, 2]})) == {"a": [1, 2]}
    # It comes from the @pypi repository in the runfiles, not from the machine's site-packages.
    assert "/pypi/site/orjson/" in orjson.__file__.replace(os.sep, "/")
    assert "site-packages" not in orjson.__file__


def test_undeclared_requirement_is_not_importable():
    # jinja2 is in the lock and installed on the machine, but this target does not depend on it.
    with pytest.raises(ImportError):
        importlib.import_module("jinja2")


def test_no_machine_site_packages_on_sys_path():
    leaks = [p for p in sys.path if "site-packages" in p and "/external/" not in p]
    assert leaks == []


def test_junit_xml_goes_to_bazel():
    assert os.environ.get("XML_OUTPUT_FILE", "").endswith("test.xml")
