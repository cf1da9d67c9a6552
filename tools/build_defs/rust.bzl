"""Rust through cargo: binaries, test executables and PyO3 extension modules of the root workspace.

    cargo_binary(name = "perfkit-load", crate = "perfkit-load", bin = "perfkit-load", srcs = glob(["src/**"]))
    cargo_test(name = "perfkit_load_test", crate = "perfkit-load", srcs = glob(["src/**", "tests/**"]))
    pyo3_extension(name = "native", crate = "requestx-client", lib = "requestx_native",
                   out = "requestx_client/_native.abi3.so", srcs = glob(["src/**"]))

Every action runs `cargo --release --frozen --offline` (cargo_action.py; test executables without the
profile's LTO) against @crates' vendored sources, with a persistent target directory in Bazel's output base: Bazel decides *whether* to
rebuild (from the declared srcs, the lock and the toolchain versions), cargo decides *what*.
The actions run unsandboxed (the target directory lives outside the sandbox), and have no network:
cargo is offline and frozen.
"""

load("@toolchains//:defs.bzl", "CARGO", "CARGO_TARGET_DIR", "PYTHON", "RUSTC")

_COMMON_ATTRS = {
    "crate": attr.string(mandatory = True, doc = "The package name in its Cargo.toml."),
    "srcs": attr.label_list(allow_files = True, doc = "Every file cargo reads for this crate (sources, its Cargo.toml, include_str! files)."),
    "_cargo_toml": attr.label(default = "//:Cargo.toml", allow_single_file = True),
    "_cargo_lock": attr.label(default = "//:Cargo.lock", allow_single_file = True),
    "_vendor_stamp": attr.label(default = "@crates//:vendor.stamp", allow_single_file = True),
    "_versions": attr.label(default = "@toolchains//:versions.txt", allow_single_file = True),
    "_action": attr.label(default = "//tools/build_defs:cargo_action.py", allow_single_file = True),
}

def _cargo(ctx, mode, out, name = ""):
    vendor_dir = ctx.file._vendor_stamp.dirname + "/vendor"
    args = [
        ctx.file._action.path,
        "--cargo", CARGO,
        "--rustc", RUSTC,
        "--python", PYTHON,
        "--vendor", vendor_dir,
        "--target-dir", CARGO_TARGET_DIR,
        "--manifest", ctx.file._cargo_toml.path,
        "--crate", ctx.attr.crate,
        "--mode", mode,
        "--out", out.path,
        "--name", name,
    ]
    ctx.actions.run(
        executable = PYTHON,
        arguments = args,
        inputs = ctx.files.srcs + [ctx.file._cargo_toml, ctx.file._cargo_lock, ctx.file._vendor_stamp, ctx.file._versions, ctx.file._action],
        outputs = [out],
        mnemonic = "Cargo",
        progress_message = "cargo %s %s %s" % (mode, ctx.attr.crate, name),
        execution_requirements = {"no-sandbox": "1", "no-remote-exec": "1"},
        use_default_shell_env = False,
    )

def _cargo_binary_impl(ctx):
    bin_name = ctx.attr.bin or ctx.attr.crate
    out = ctx.actions.declare_file(ctx.label.name + ".bin") if ctx.label.name == bin_name else ctx.actions.declare_file(bin_name)
    _cargo(ctx, "bin", out, bin_name)
    return [DefaultInfo(executable = out, files = depset([out]), runfiles = ctx.runfiles(files = ctx.files.data))]

cargo_binary = rule(
    implementation = _cargo_binary_impl,
    executable = True,
    attrs = dict(_COMMON_ATTRS, bin = attr.string(), data = attr.label_list(allow_files = True)),
)

def _cargo_test_impl(ctx):
    bins = ctx.actions.declare_directory(ctx.label.name + "_test_bins")
    _cargo(ctx, "test", bins)
    runner = ctx.actions.declare_file(ctx.label.name + "_runner.sh")

    # Like `cargo test`: every test executable of the crate, from the crate's folder, all must pass.
    ctx.actions.write(runner, """#!/bin/bash
set -u
bins="$PWD/{bins}"
cd "{pkg}" || exit 1
export CARGO_MANIFEST_DIR="$PWD"
status=0
for exe in "$bins"/*; do
  echo "=== $(basename "$exe")"
  "$exe" "$@" || status=1
done
exit $status
""".format(bins = bins.short_path, pkg = ctx.label.package or "."), is_executable = True)
    runfiles = ctx.runfiles(files = [bins] + ctx.files.srcs + ctx.files.data)
    for d in ctx.attr.data:
        runfiles = runfiles.merge(d[DefaultInfo].default_runfiles)
    return [DefaultInfo(executable = runner, runfiles = runfiles)]

cargo_test = rule(
    implementation = _cargo_test_impl,
    test = True,
    attrs = dict(_COMMON_ATTRS, data = attr.label_list(allow_files = True)),
)

def _pyo3_extension_impl(ctx):
    if not ctx.attr.out.endswith(".so"):
        fail("pyo3_extension: out must end with .so (e.g. pkg/_native.abi3.so)")
    out = ctx.actions.declare_file(ctx.attr.out)
    _cargo(ctx, "cdylib", out, ctx.attr.lib)
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

pyo3_extension = rule(
    implementation = _pyo3_extension_impl,
    doc = "Builds the crate's cdylib and places it at `out` (relative to the package), importable from Python.",
    attrs = dict(_COMMON_ATTRS, lib = attr.string(mandatory = True), out = attr.string(mandatory = True)),
)
