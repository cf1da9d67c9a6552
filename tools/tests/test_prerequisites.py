"""Every system file the build, the tests and the benches use comes from a package that tools/bazel installs.

A machine where a package was once installed by hand passes every other test while a fresh machine fails: this
test closes that gap. For each file used (the commands run by the rules, tests and benches, the paths WORKSPACE
names, and every file the linker reads when ldc2 links a libFuzzer target or OpenSSL), `dpkg -S` names the package that
owns it, and that package must be one tools/bazel installs (`tools/bazel --print-packages`), a dependency apt
installs with one of them, or the package of a toolchain the launcher requires (python3, cargo, rustc, cc,
node). A file that no package owns must belong to such a toolchain. Conversely, every listed package must
provide something used.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.path.abspath(__file__)).parent.parent.parent
LAUNCHER = ROOT / "tools" / "bazel"

# Commands run by the rules (ldc2, bazel-4), the tests (prometheus, promtool, nginx, taskset, node) and the bench
# targets (wrk, nginx, h2load, openssl). Keep in step with what the code runs.
COMMANDS = ["bazel-4", "ldc2", "prometheus", "promtool", "nginx", "wrk", "taskset", "node", "ip", "h2load", "openssl"]
# Toolchains the machine image ships; tools/bazel checks they are on PATH but installs none of them. Under
# Bazel, python3, rustc and cargo are found through @toolchains (test actions see a fixed PATH).
TOOLCHAINS = ["python3", "cargo", "rustc", "cc", "node", "npm"]
SEARCH_PATH = os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin"

pytestmark = pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs a Debian machine (dpkg)")


def _recorded_toolchains() -> dict[str, str]:
    """tool -> absolute path, from @toolchains//:versions.txt (lines `name version... /abs/path`)."""
    path = os.environ.get("PERFMONO_TOOLCHAIN_VERSIONS")
    if not path:
        return {}
    out = {}
    for line in Path(path).read_text().splitlines():
        name, last = line.split(" ", 1)[0], line.rsplit(" ", 1)[-1]
        if last.startswith("/"):
            out[name] = last
    return out


RECORDED = _recorded_toolchains()


def which(cmd: str) -> str:
    path = RECORDED.get(cmd) or shutil.which(cmd, path=SEARCH_PATH)
    assert path, f"{cmd} is not installed: tools/bazel should have installed it"
    return os.path.realpath(path)


def launcher_packages() -> set[str]:
    out = subprocess.run([str(LAUNCHER), "--print-packages"], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def owner(path: str) -> str | None:
    """The package that installed `path` (symlinks in the path resolved as dpkg records them), or None."""
    for candidate in dict.fromkeys([path, os.path.realpath(path)]):
        # /bin and /lib are symlinks to /usr/... on current Debian; dpkg may have recorded either form
        for form in dict.fromkeys([candidate, re.sub(r"^/usr/(bin|sbin|lib|lib64)/", r"/\1/", candidate)]):
            r = subprocess.run(["dpkg", "-S", form], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout.split(":", 1)[0].split(",")[0].strip()
    return None


def installed_graph() -> tuple[dict[str, list[list[str]]], dict[str, str]]:
    """Installed package -> its Depends/Pre-Depends (each a list of alternatives); virtual name -> a provider."""
    fmt = "${Package}\t${Status}\t${Pre-Depends}, ${Depends}\t${Provides}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f", fmt], capture_output=True, text=True, check=True).stdout
    deps, provides = {}, {}
    for line in out.splitlines():
        name, status, depends, provided = (line.split("\t") + ["", "", ""])[:4]
        if "installed" not in status.split():
            continue
        deps[name] = [[alt.split()[0].split(":")[0] for alt in group.split("|") if alt.strip()]
                      for group in depends.split(",") if group.strip()]
        for p in provided.split(","):
            if p.strip():
                provides.setdefault(p.split()[0], name)
    return deps, provides


def closure(roots: set[str]) -> set[str]:
    """The roots and every installed package they depend on, transitively (what apt installs with them)."""
    deps, provides = installed_graph()
    seen, todo = set(), list(roots)
    while todo:
        pkg = todo.pop()
        pkg = pkg if pkg in deps else provides.get(pkg, pkg)
        if pkg in seen:
            continue
        seen.add(pkg)
        for group in deps.get(pkg, []):
            present = [alt if alt in deps else provides.get(alt) for alt in group]
            todo.extend(p for p in present if p)  # every installed alternative counts
    return seen


def link_inputs(tmp: Path, name: str, source: str, flags: list[str], expect: str) -> list[str]:
    """The files the linker reads when ldc2 links `source` with `flags`; one of them must contain `expect`."""
    work = tmp / name
    work.mkdir()
    src = work / "target.d"
    src.write_text(source)
    r = subprocess.run([which("ldc2"), *flags, str(src), f"-of={work / 'target'}", "-L--trace"],
                       capture_output=True, text=True, cwd=work)
    assert r.returncode == 0, f"ldc2 cannot link {name}:\n{r.stderr[-2000:]}"
    files = {os.path.normpath(line.strip()) for line in (r.stdout + r.stderr).splitlines()
             if line.strip().startswith("/") and not line.strip().startswith(str(work))}
    assert any(expect in f for f in files), f"no {expect} among the linker's inputs: {sorted(files)}"
    return sorted(files)


def fuzz_link_inputs(tmp: Path) -> list[str]:
    """The files the linker reads when ldc2 links a libFuzzer target, as aurora_app's parser_fuzz does."""
    return link_inputs(tmp, "fuzz", "extern(C) int LLVMFuzzerTestOneInput(const(ubyte)* d, size_t n) { return 0; }\n",
                       ["-fsanitize=fuzzer"], "fuzzer")


def tls_link_inputs(tmp: Path) -> list[str]:
    """The files the linker reads when ldc2 links OpenSSL in, as aurora_app does (its `linkopts`)."""
    return link_inputs(tmp, "tls", "extern(C) int OPENSSL_init_ssl(ulong, const(void)*);\n"
                                   "void main() { OPENSSL_init_ssl(0, null); }\n",
                       ["-L-lssl", "-L-lcrypto"], "libssl")


def workspace_paths() -> list[str]:
    text = (ROOT / "WORKSPACE").read_text()
    return [p + "/WORKSPACE" for p in re.findall(r'path\s*=\s*"(/[^"]+)"', text)]


def used_files(tmp: Path) -> dict[str, str]:
    """File -> why it is used."""
    used = {which(c): f"command `{c}`" for c in COMMANDS}
    used.update({p: "WORKSPACE local_repository" for p in workspace_paths()})
    used.update({f: "linked by ldc2 -fsanitize=fuzzer" for f in fuzz_link_inputs(tmp)})
    used.update({f: "linked by ldc2 -L-lssl -L-lcrypto" for f in tls_link_inputs(tmp)})
    return used


def toolchain_packages() -> set[str]:
    return {p for p in (owner(which(t)) for t in TOOLCHAINS) if p}


def toolchain_roots() -> list[str]:
    """Folders of toolchains installed outside dpkg (pyenv, rustup)."""
    roots = []
    for tool in ("python3", "cargo", "rustc"):
        real = which(tool)
        if owner(real) is None:
            roots.append(str(Path(real).parent.parent))
    return roots


def test_every_used_file_comes_from_a_package_tools_bazel_installs(tmp_path):
    listed = launcher_packages()
    allowed = closure(listed | toolchain_packages())
    unowned_ok = toolchain_roots()
    problems = []
    for path, why in sorted(used_files(tmp_path).items()):
        pkg = owner(path)
        if pkg is None:
            if not any(path.startswith(root + "/") for root in unowned_ok):
                problems.append(f"{path} ({why}) belongs to no Debian package: installed by hand?")
        elif pkg not in allowed:
            problems.append(f"{path} ({why}) comes from package {pkg}, which tools/bazel does not install: "
                            f"add it to tools/bazel's list")
    assert not problems, "\n".join(problems)


def test_every_listed_package_provides_something_used(tmp_path):
    owners = {owner(p) for p in used_files(tmp_path)}
    unused = [pkg for pkg in sorted(launcher_packages()) if not (closure({pkg}) & owners)]
    assert not unused, f"tools/bazel installs packages nothing uses: {unused}"


def test_print_packages_lists_the_launchers_table():
    text = LAUNCHER.read_text()
    table = set(re.findall(r"^\s*\[[^\]]+\]=([a-z0-9][a-z0-9.+-]+)", text, flags=re.M))
    assert table and launcher_packages() == table
