"""Vendors every crate of the root Cargo workspace once, from Cargo.lock.

`cargo vendor --locked` downloads from the crate registry and checks each crate against the
checksum in Cargo.lock: a tampered or stale lock fails the fetch with cargo's message. Build
actions later run cargo `--frozen --offline` against this folder and never reach the network.
"""

def _cargo_vendor_repository_impl(rctx):
    cargo = rctx.read(rctx.attr._cargo_path).strip()
    workspace_manifest = rctx.path(rctx.attr.cargo_toml)
    lock = rctx.read(rctx.attr.cargo_lock)  # read: a changed lock re-runs this rule
    home = rctx.os.environ.get("HOME", "")
    cargo_home = (home + "/.cache/perfmono/cargo-home") if home else str(rctx.path("cargo-home"))
    rctx.report_progress("cargo vendor --locked")
    res = rctx.execute(
        [cargo, "vendor", "--locked", "--versioned-dirs", "--manifest-path", str(workspace_manifest), str(rctx.path("vendor"))],
        environment = {"CARGO_HOME": cargo_home, "PATH": str(rctx.path(cargo).dirname) + ":/usr/bin:/bin"},
        timeout = 1800,
        quiet = True,
    )
    if res.return_code != 0:
        fail("cargo_vendor_repository: `cargo vendor --locked` failed (a wrong checksum or an out-of-date Cargo.lock?):\n" + res.stderr[-6000:])

    # The stamp carries the lock's content: it is the one input that stands for the vendored tree.
    rctx.file("vendor.stamp", lock)
    rctx.file("WORKSPACE", "workspace(name = %r)\n" % rctx.name)
    rctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])
exports_files(["vendor.stamp"])
""")

cargo_vendor_repository = repository_rule(
    implementation = _cargo_vendor_repository_impl,
    attrs = {
        "cargo_lock": attr.label(mandatory = True, allow_single_file = True),
        "cargo_toml": attr.label(mandatory = True, allow_single_file = True),
        "_cargo_path": attr.label(default = "@toolchains//:cargo_path.txt"),
    },
    environ = ["HOME"],
)
