"""Validate Grafana dashboard JSON against Grafana's own dashboard schema.

The schema is the one Grafana publishes as TypeScript types in the Apache-2.0 npm package `@grafana/schema`
(the dashboard model and, per panel plugin, its `Options` and `FieldConfig`). There is no JSON Schema of it, so
the check writes each dashboard and each panel's options as typed TypeScript constants and lets the TypeScript
compiler judge them: a field of the wrong type, a field the schema does not know (excess-property checks), a
missing required field or a panel type with no schema in the package all fail, each named by dashboard and panel.

    python3 dashboards/grafana/schema_check.py --node-modules DIR dashboards/grafana/dashboards/*.json

`DIR` is a node_modules holding `@grafana/schema` and `typescript` (third_party/npm; under Bazel the test gets it
from the @npm repository).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA_PKG = "@grafana/schema"
DASHBOARD_TYPES = f"{SCHEMA_PKG}/dist/esm/raw/dashboard/x/Dashboard_types.gen"
PANELCFG = re.compile(r"^\./dist/esm/raw/composable/([a-z0-9]+)/panelcfg/x/(\w+)_types\.gen$")
TSC_ERROR = re.compile(r"^[^(]+\((\d+),\d+\): (error TS\d+: .*)$")

# The schema's enumerations are TypeScript string enums, which a JSON string literal is not assignable to: the
# JSON form of a type has each string enum replaced by the union of its values (`${E}`), recursively.
WIRE_TYPE = [
    "type Wire<T> =",
    "  T extends string ? `${T}` :",
    "  T extends number | boolean | null | undefined ? T :",
    "  T extends ReadonlyArray<infer U> ? Array<Wire<U>> :",
    "  T extends object ? { [K in keyof T]: Wire<T[K]> } : T;",
]


def panel_schemas(node_modules: Path) -> dict[str, str]:
    """Panel plugin type -> import path of its `Options`/`FieldConfig` types, read from the package's exports."""
    exports = json.loads((node_modules / SCHEMA_PKG / "package.json").read_text())["exports"]
    out = {}
    for key in exports:
        m = PANELCFG.match(key)
        if m:
            out[m.group(1)] = SCHEMA_PKG + key[1:]
    return out


def schema_version(node_modules: Path) -> str:
    return json.loads((node_modules / SCHEMA_PKG / "package.json").read_text())["version"]


@dataclass
class _Source:
    """The TypeScript program being written, with the label of every line range (to name errors)."""
    lines: list[str] = field(default_factory=list)
    labels: list[tuple[int, str]] = field(default_factory=list)  # (first line, label), ascending

    def const(self, label: str, name: str, type_name: str, value) -> None:
        self.labels.append((len(self.lines) + 1, label))
        body = json.dumps(value, indent=2, ensure_ascii=False).splitlines()
        self.lines.append(f"export const {name}: {type_name} = {body[0]}")
        self.lines.extend(body[1:])
        self.lines[-1] += ";"

    def label_of(self, line: int) -> str:
        found = "?"
        for first, label in self.labels:
            if first > line:
                break
            found = label
        return found


def _panels(dashboard: dict):
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows carry their panels


def _write_program(dashboards: dict[str, dict], schemas: dict[str, str]) -> tuple[_Source, list[str]]:
    src = _Source()
    problems = []
    used = sorted({p.get("type") for d in dashboards.values() for p in _panels(d)} & set(schemas))
    src.lines.append(f'import type {{ Dashboard }} from "{DASHBOARD_TYPES}";')
    src.lines.extend(WIRE_TYPE)
    for i, ptype in enumerate(used):
        src.lines.append(f'import type * as panel{i} from "{schemas[ptype]}";')
    alias = {ptype: f"panel{i}" for i, ptype in enumerate(used)}
    for d_index, (name, dash) in enumerate(sorted(dashboards.items())):
        src.const(f"{name}", f"dashboard{d_index}", "Wire<Dashboard>", dash)
        for p_index, panel in enumerate(_panels(dash)):
            ptype, title = panel.get("type"), panel.get("title", "")
            where = f"{name}: panel {panel.get('id')} {title!r} ({ptype})"
            if ptype == "row":
                continue
            if ptype not in alias:
                problems.append(f"{where}: panel type {ptype!r} has no schema in {SCHEMA_PKG}")
                continue
            ns, stem = alias[ptype], f"d{d_index}p{p_index}"
            if "options" in panel:
                src.const(f"{where}: options", f"{stem}_options", f"Wire<{ns}.Options>", panel["options"])
            custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom")
            if custom is not None:
                src.const(f"{where}: fieldConfig.defaults.custom", f"{stem}_custom", f"Wire<{ns}.FieldConfig>", custom)
    return src, problems


def check(dashboards: dict[str, dict], node_modules: Path, node: str | None = None) -> list[str]:
    """Every problem found (empty: all valid). `dashboards` maps a name to the parsed dashboard JSON."""
    node = node or shutil.which("node")
    if not node:
        raise RuntimeError("node not found: the schema check runs the TypeScript compiler on Node.js")
    node_modules = Path(node_modules).absolute()
    src, problems = _write_program(dashboards, panel_schemas(node_modules))
    with tempfile.TemporaryDirectory(prefix="dashboard-schema-") as tmp:
        (Path(tmp) / "node_modules").symlink_to(node_modules, target_is_directory=True)
        program = Path(tmp) / "dashboards.ts"
        program.write_text("\n".join(src.lines) + "\n", encoding="utf-8")
        tsc = node_modules / "typescript" / "bin" / "tsc"
        r = subprocess.run(
            [node, str(tsc), "--noEmit", "--strict", "--skipLibCheck", "--target", "es2022", "--module", "esnext",
             "--moduleResolution", "bundler", "--pretty", "false", str(program)],
            capture_output=True, text=True, cwd=tmp, timeout=300)
    for line in r.stdout.splitlines():
        m = TSC_ERROR.match(line)
        if m:
            problems.append(f"{src.label_of(int(m.group(1)))}: {m.group(2)}")
        elif line.startswith("  ") and problems:
            problems[-1] += " " + line.strip()  # tsc's continuation lines (the nested reason)
        elif line.strip():
            problems.append(line)
    if r.returncode != 0 and not problems:
        problems.append(f"tsc exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--node-modules", type=Path, required=True, help="folder with @grafana/schema and typescript")
    ap.add_argument("dashboards", nargs="+", type=Path)
    args = ap.parse_args(argv)
    dashboards = {}
    for path in args.dashboards:
        try:
            dashboards[path.name] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
    problems = check(dashboards, args.node_modules)
    for p in problems:
        print(p, file=sys.stderr)
    version = schema_version(args.node_modules)
    print(f"{len(dashboards)} dashboards checked against {SCHEMA_PKG} {version}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
