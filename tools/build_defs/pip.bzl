"""Third-party Python from a pip-compile lock (with hashes), one py_library per distribution.

    pip_lock_repository(name = "pypi", lock = "//third_party/python:requirements_lock.txt")
    load("@pypi//:requirements.bzl", "requirement")
    py_library(..., deps = [requirement("orjson")])

The fetch runs `pip install --no-deps --require-hashes --only-binary=:all:` into one target folder
(a wrong hash or a missing wheel fails it, naming the package), then pip_generate.py turns every
installed distribution's RECORD and Requires-Dist into a py_library.
"""

def _pip_lock_repository_impl(rctx):
    python = rctx.read(rctx.attr._python_path).strip()
    lock = rctx.path(rctx.attr.lock)
    rctx.report_progress("pip install --require-hashes from %s" % rctx.attr.lock.name)
    res = rctx.execute(
        [
            python, "-m", "pip", "install",
            "--no-deps", "--require-hashes", "--only-binary=:all:",
            "--disable-pip-version-check", "--no-warn-script-location", "--no-input",
            "--target", "site",
            "-r", str(lock),
        ],
        timeout = 1800,
        quiet = True,  # failures still show pip's output, through fail()
    )
    if res.return_code != 0:
        fail("pip_lock_repository(%s): installing %s failed.\n%s\n%s" % (rctx.name, rctx.attr.lock, res.stdout[-3000:], res.stderr[-6000:]))
    res = rctx.execute([python, rctx.path(rctx.attr._generator), "site", rctx.name, str(lock)], timeout = 600)
    if res.return_code != 0:
        fail("pip_lock_repository(%s): generating BUILD failed:\n%s%s" % (rctx.name, res.stdout, res.stderr))

pip_lock_repository = repository_rule(
    implementation = _pip_lock_repository_impl,
    attrs = {
        "lock": attr.label(mandatory = True, allow_single_file = True),
        "_generator": attr.label(default = "//tools/build_defs:pip_generate.py"),
        "_python_path": attr.label(default = "@toolchains//:python_path.txt"),
    },
)
