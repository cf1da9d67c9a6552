"""D with LDC (ldc2): d_library, d_binary, d_test.

    d_library(name = "aurora", srcs = glob(["source/aurora/*.d"]), imports = ["source"])
    d_binary(name = "server", srcs = ["source/app.d"], deps = [":aurora"])
    d_test(name = "aurora_unittest", deps = [":aurora"])   # runs every unittest block of the deps

A library compiles to a static archive (release, -O); a binary links the archives; a test compiles
the libraries' sources again with -unittest (and a generated main when none is given) and runs them:
a failing unittest fails the test. `imports` are folders relative to the package that hold the
top of the module tree (`module aurora.parser;` in source/aurora/parser.d -> imports = ["source"]);
the default is the package folder, or its `source`/`src` folder when the sources live there.
"""

load("@toolchains//:defs.bzl", "LDC2")

DInfo = provider(fields = {
    "srcs": "depset of all D sources (this library and its deps)",
    "imports": "depset of import folders (execroot-relative)",
    "archives": "depset of static archives to link",
    "linkopts": "depset of linker flags (ldc2's -L...) that the libraries need, e.g. system libraries",
})

_RELEASE_FLAGS = ["-O3", "-release"]

def _import_dirs(ctx):
    pkg = ctx.label.package
    roots = ctx.attr.imports
    if not roots:
        roots = ["."]
        for f in ctx.files.srcs:
            rel = f.short_path[len(pkg) + 1:] if pkg else f.short_path
            for candidate in ("source", "src"):
                if rel.startswith(candidate + "/"):
                    roots = [candidate]
    return [(pkg + "/" + r).rstrip("/.") if pkg else r for r in roots]

def _collect(ctx):
    srcs = depset(ctx.files.srcs, transitive = [d[DInfo].srcs for d in ctx.attr.deps])
    imports = depset(_import_dirs(ctx), transitive = [d[DInfo].imports for d in ctx.attr.deps])
    # topological: a library's archive comes before the archives of its deps, the order a static link needs
    archives = depset(transitive = [d[DInfo].archives for d in ctx.attr.deps], order = "topological")
    return srcs, imports, archives

def _linkopts(ctx):
    return depset(ctx.attr.linkopts, transitive = [d[DInfo].linkopts for d in ctx.attr.deps])

def _ldc(ctx, inputs, flags, out, progress):
    ctx.actions.run(
        executable = LDC2,
        arguments = flags + ["-of=" + out.path] + [f.path for f in ctx.files.srcs],
        inputs = depset(ctx.files.srcs + [ctx.file._versions], transitive = [inputs]),
        outputs = [out],
        mnemonic = "Ldc2",
        env = {"PATH": "/usr/bin:/bin"},  # ldc2 links through the system `cc`
        progress_message = progress,
    )

def _import_flags(imports):
    return ["-I=" + (d or ".") for d in imports.to_list()]

def _d_library_impl(ctx):
    srcs, imports, archives = _collect(ctx)
    lib = ctx.actions.declare_file("lib%s.a" % ctx.label.name)
    _ldc(ctx, depset(transitive = [srcs]), ["-lib"] + _RELEASE_FLAGS + ctx.attr.dflags + _import_flags(imports), lib, "ldc2 -lib %s" % ctx.label)
    return [
        DefaultInfo(files = depset([lib])),
        DInfo(
            srcs = srcs,
            imports = imports,
            archives = depset([lib], transitive = [archives], order = "topological"),
            linkopts = _linkopts(ctx),
        ),
    ]

_ATTRS = {
    "srcs": attr.label_list(allow_files = [".d", ".di"]),
    "deps": attr.label_list(providers = [DInfo]),
    "imports": attr.string_list(),
    "dflags": attr.string_list(),
    # system libraries a library needs at link time, as ldc2 flags (-L-lssl): every binary and test using it links them
    "linkopts": attr.string_list(),
    "_versions": attr.label(default = "@toolchains//:versions.txt", allow_single_file = True),
}

d_library = rule(implementation = _d_library_impl, attrs = _ATTRS)

def _d_binary_impl(ctx):
    srcs, imports, archives = _collect(ctx)
    out = ctx.actions.declare_file(ctx.label.name)
    flags = _RELEASE_FLAGS + ctx.attr.dflags + _import_flags(imports) + [a.path for a in archives.to_list()]
    flags += _linkopts(ctx).to_list()
    _ldc(ctx, depset(transitive = [srcs, archives]), flags, out, "ldc2 %s" % ctx.label)
    return [DefaultInfo(executable = out, files = depset([out]), runfiles = ctx.runfiles(files = ctx.files.data))]

d_binary = rule(
    implementation = _d_binary_impl,
    executable = True,
    attrs = dict(_ATTRS, data = attr.label_list(allow_files = True)),
)

def _d_test_impl(ctx):
    srcs, imports, _ = _collect(ctx)
    out = ctx.actions.declare_file(ctx.label.name)

    # Unit tests run on every source of the deps too (a library's unittest blocks live in it).
    all_srcs = [f for f in srcs.to_list() if f not in ctx.files.srcs]
    # -allinst: with -checkaction=context LDC 1.30 otherwise leaves some assert-message templates undefined.
    flags = ["-unittest", "-g", "-checkaction=context", "-allinst"] + ctx.attr.dflags + _import_flags(imports) + [f.path for f in all_srcs]
    flags += _linkopts(ctx).to_list()
    if not ctx.attr.has_main:
        flags.append("-main")
    _ldc(ctx, srcs, flags, out, "ldc2 -unittest %s" % ctx.label)
    return [DefaultInfo(executable = out, runfiles = ctx.runfiles(files = ctx.files.data))]

d_test = rule(
    implementation = _d_test_impl,
    test = True,
    attrs = dict(_ATTRS, data = attr.label_list(allow_files = True), has_main = attr.bool(default = False)),
)
