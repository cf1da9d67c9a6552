"""The Python driver of the conformance test: the observation script on stdin, the exposition on stdout.

    python driver.py [--openmetrics] < observations.tsv
"""
from __future__ import annotations

import sys

from perfkit_metrics import Registry


def _split(field: str) -> tuple:
    return tuple(field.split(",")) if field else ()


def _field(value: str) -> str:
    return value.replace("\\n", "\n")


def run(lines, registry: Registry) -> None:
    servers, hots, clients = {}, {}, {}
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        op, *f = [_field(x) for x in line.split("\t")]
        try:
            if op == "server":
                service, route, method, status, seconds = f
                server = servers.get(service) or servers.setdefault(service, registry.http_server(service))
                server.observe(route, method, int(status), float(seconds))
            elif op == "hot":
                service, hotpath, seconds = f
                hot = hots.get(service) or hots.setdefault(service, registry.hotpaths(service))
                hot.observe(hotpath, float(seconds))
            elif op in ("client", "stage"):
                client = clients.get(f[0]) or clients.setdefault(f[0], registry.http_client(f[0]))
                if op == "client":
                    client.observe(f[1], f[2], int(f[3]), float(f[4]))
                else:
                    client.stage(f[1], float(f[2]))
            elif op in ("counter", "gauge", "histogram"):
                name, help_, names, values, amount = f
                family = getattr(registry, op)(name, help_, _split(names))
                if op == "counter":
                    family.inc(_split(values), float(amount))
                elif op == "gauge":
                    family.set(_split(values), float(amount))
                else:
                    family.observe(_split(values), float(amount))
            else:
                raise ValueError(f"unknown operation {op!r}")
        except ValueError as e:  # wrong field count, a number that is not one, an unknown operation
            raise SystemExit(f"line {number}: {e}") from None


def main(argv: list[str]) -> int:
    registry = Registry()
    run(sys.stdin, registry)
    accept = "application/openmetrics-text; version=1.0.0" if "--openmetrics" in argv else ""
    body, _ = registry.exposition(accept)
    sys.stdout.buffer.write(body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
