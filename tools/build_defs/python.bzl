"""py_pytest_test: a py_test that runs pytest on its test files (see pytest_runner.py).

    py_pytest_test(
        name = "e2e_test",
        srcs = ["tests/test_e2e.py", "tests/conftest.py"],
        deps = [":mylib", requirement("httpx")],
        data = [":server_bin"],
        env = {"SERVER_BIN": "$(rootpath :server_bin)"},
    )

Test files are the srcs named test_*.py or *_test.py; the others (conftest.py, helpers) are
imported by them. pytest itself comes from the lock.
"""

load("@pypi//:requirements.bzl", "requirement")

_RUNNER = "//tools/build_defs:pytest_runner.py"

def py_pytest_test(name, srcs, deps = [], data = [], env = {}, args = [], **kwargs):
    pkg = native.package_name()
    test_files = []
    for src in srcs:
        base = src.split("/")[-1]
        if base.endswith(".py") and (base.startswith("test_") or base.endswith("_test.py")):
            test_files.append((pkg + "/" + src) if pkg else src)
    if not test_files:
        fail("py_pytest_test(%s): no test_*.py or *_test.py among srcs" % name)
    env_args = ["--bazel-env=%s=%s" % (k, v) for k, v in env.items()]
    pytest = requirement("pytest")
    native.py_test(
        name = name,
        srcs = srcs + [_RUNNER],
        main = _RUNNER,
        deps = deps + ([] if pytest in deps else [pytest]),
        data = data,
        args = env_args + args + test_files,
        python_version = "PY3",
        srcs_version = "PY3",
        **kwargs
    )
