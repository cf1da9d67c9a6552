"""Third-party Node packages from an npm lock (integrity hashes required), as one node_modules folder.

    npm_lock_repository(name = "npm", package_json = "//third_party/npm:package.json",
                        package_lock = "//third_party/npm:package-lock.json")
    data = ["@npm//:node_modules", "@npm//:node_path.txt"]

The fetch runs `npm ci --ignore-scripts` (the lock's sha512 of every package is checked; install scripts never
run). `node_path.txt` holds the absolute path of the machine's Node.js, for tests that run a package's tool
(test actions see a fixed PATH).
"""

def _npm_lock_repository_impl(rctx):
    node = rctx.which("node")
    npm = rctx.which("npm")
    if not node or not npm:
        fail("npm_lock_repository(%s): node and npm must be on PATH (this machine kind ships Node.js)" % rctx.name)
    rctx.symlink(rctx.attr.package_json, "package.json")
    rctx.symlink(rctx.attr.package_lock, "package-lock.json")
    rctx.report_progress("npm ci from %s" % rctx.attr.package_lock.name)
    res = rctx.execute(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier"],
        timeout = 900,
        quiet = True,
    )
    if res.return_code != 0:
        fail("npm_lock_repository(%s): npm ci failed.\n%s\n%s" % (rctx.name, res.stdout[-3000:], res.stderr[-6000:]))
    rctx.file("node_path.txt", str(node) + "\n")
    rctx.file("BUILD.bazel", "\n".join([
        'package(default_visibility = ["//visibility:public"])',
        'exports_files(["node_path.txt", "package.json"])',
        'filegroup(name = "node_modules", srcs = glob(["node_modules/**"]))',
        "",
    ]))

npm_lock_repository = repository_rule(
    implementation = _npm_lock_repository_impl,
    attrs = {
        "package_json": attr.label(mandatory = True, allow_single_file = True),
        "package_lock": attr.label(mandatory = True, allow_single_file = True),
    },
)
