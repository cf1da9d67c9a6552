"""The scenario registry: one declarative TOML file per service in ``perfkit/scenarios/``.

A *server* scenario names the systems compared (the service, its peers, its floor), how each starts
(command, environment, files written to its temp dir, readiness URL, /metrics URL) and the workloads
driven at all of them. A *client* scenario names one local server and the client libraries driven
against it, each by a small driver process.

Strings in ``command``, ``env``, ``cwd``, ``ready``, ``metrics`` and ``files`` may use placeholders:
``${port}`` (a free port chosen by the bench), ``${host}``, ``${tmp}`` (a fresh temp dir per system),
``${python}`` (this interpreter), ``${peers}`` (the peer apps folder), ``${bin:NAME}`` (a binary,
resolved by the bench from ``--bin NAME=PATH``, ``PERFKIT_BIN_NAME`` or ``PATH``), and for a system with
``tls = true`` ``${tls_cert}`` and ``${tls_key}`` (a certificate for 127.0.0.1 and localhost made for the run,
and its key, PEM: the load engine trusts it and drives the workloads over ``https://``). A client scenario's
server with ``tls = true`` keeps its plain ``${port}`` and also serves HTTPS on ``${tls_port}``: its
workloads with ``tls = true`` are driven there, each client verifying the certificate against the run's CA.
Services added later register by adding a file; nothing else changes.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field

KINDS = ("server", "client")
ROLES = ("service", "variant", "original", "peer", "floor")  # variant: the service configured otherwise, never a peer
MODES = ("http", "ws")
SUITES = ("quick", "full")
PLACEHOLDERS = ("port", "host", "tmp", "python", "peers", "bin", "tls_cert", "tls_key", "tls_port")
CLIENTS = ("requestx_client", "requests", "httpx", "urllib3", "aiohttp", "pycurl", "pyreqwest", "niquests",
           "requestx")

DEFAULT_SLO_P99_US = 10_000
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(us|µs|ms|s)\s*$")
_ENV_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\$\{([a-z_]+)(?::([A-Za-z0-9_.+-]+))?\}")
_NAME = re.compile(r"^[a-z][a-z0-9_.+-]*$")
_HTTP_METHOD = re.compile(r"^[A-Z]+$")


class ScenarioError(ValueError):
    """A scenario file (or a name asked for) is not valid; the message says where and why."""


@dataclass(frozen=True)
class Version:
    dist: str | None = None  # a Python distribution: importlib.metadata.version(dist)
    command: tuple[str, ...] | None = None  # a command whose first output line is the version
    text: str | None = None  # a fixed text (e.g. "repo" for this repository's code)


@dataclass(frozen=True)
class System:
    name: str
    role: str
    command: tuple[str, ...]  # empty for a system already running at ``url``
    ready: str
    description: str = ""
    env: dict = field(default_factory=dict)
    cwd: str | None = None
    metrics: str | None = None
    files: dict = field(default_factory=dict)
    version: Version = Version()
    ready_timeout_s: float = 30.0
    suites: tuple[str, ...] = SUITES  # server scenarios: the suites this system runs in (default: all)
    url: str | None = None  # a system the bench does not start: the base URL it already answers at
    # server scenarios: the workloads this system serves (None: all); the others are not run against it
    workloads: tuple[str, ...] | None = None
    tls: bool = False  # serves HTTPS with the certificate the bench makes (${tls_cert}, ${tls_key})

    def serves(self, workload: str) -> bool:
        return self.workloads is None or workload in self.workloads

    def bins(self) -> set[str]:
        """The ``${bin:NAME}`` binaries this system needs."""
        texts = list(self.command) + list(self.env.values()) + list(self.files.values())
        return {m.group(2) for t in texts for m in _PLACEHOLDER.finditer(t) if m.group(1) == "bin"}


@dataclass(frozen=True)
class Workload:
    name: str
    mode: str = "http"
    method: str = "GET"
    path: str = "/"
    body: str | None = None
    headers: tuple[str, ...] = ()
    connections: int = 16
    suites: tuple[str, ...] = SUITES
    slo_p99_us: int = DEFAULT_SLO_P99_US  # server scenarios: the corrected p99 a sustained rate must stay under
    tls: bool = False  # client scenarios: driven over https on the server's ${tls_port}


@dataclass(frozen=True)
class Client:
    name: str
    role: str
    client: str
    description: str = ""
    version: Version = Version()
    # a Python environment of its own (a pip_lock_repository name such as "pypi_niquests"): the driver then runs
    # in a separate interpreter that sees only that environment's site-packages, never the bench's
    environment: str = ""
    # an opt-in client whose environment is built by hand: how to build it. Without its environment the client
    # is reported as skipped with this hint (``${python}`` = the bench's interpreter) instead of failing
    build: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str
    description: str
    path: str
    systems: tuple[System, ...] = ()  # server scenarios
    workloads: tuple[Workload, ...] = ()
    server: System | None = None  # client scenarios: the local server the clients hit
    clients: tuple[Client, ...] = ()
    # server scenarios: the system whose max sets the constant rates (None: the slowest system)
    rate_reference: str | None = None

    def members(self) -> tuple:
        """Systems (server scenario) or clients (client scenario)."""
        return self.systems if self.kind == "server" else self.clients

    def member_names(self) -> list[str]:
        return [m.name for m in self.members()]

    def workloads_for(self, suite: str) -> list[Workload]:
        return [w for w in self.workloads if suite in w.suites]


# ---------------------------------------------------------------------------------------------- parsing


class _Ctx:
    def __init__(self, path: str):
        self.path = path

    def fail(self, where: str, msg: str):
        raise ScenarioError(f"{self.path}: {where}: {msg}")


def _check_keys(ctx: _Ctx, where: str, table: dict, required: tuple, optional: tuple) -> None:
    if not isinstance(table, dict):
        ctx.fail(where, f"must be a table, got {type(table).__name__}")
    for k in required:
        if k not in table:
            ctx.fail(where, f"missing required key {k!r}")
    allowed = set(required) | set(optional)
    for k in table:
        if k not in allowed:
            ctx.fail(where, f"unknown key {k!r} (valid keys: {', '.join(sorted(allowed))})")


def _str(ctx, where, v, key, *, empty_ok=False) -> str:
    if not isinstance(v, str):
        ctx.fail(where, f"{key!r} must be a string, got {type(v).__name__}")
    if not empty_ok and not v.strip():
        ctx.fail(where, f"{key!r} must not be empty")
    return v


def _name(ctx, where, v, key="name") -> str:
    _str(ctx, where, v, key)
    if not _NAME.match(v):
        ctx.fail(where, f"{key} {v!r} must be lower case letters, digits and _.+- (starting with a letter)")
    return v


def _enum(ctx, where, v, key, valid) -> str:
    if v not in valid:
        ctx.fail(where, f"{key} {v!r} is not valid (valid: {', '.join(valid)})")
    return v


def _placeholders(ctx, where, text: str) -> None:
    for m in re.finditer(r"\$\{([^}]*)\}", text):
        pm = _PLACEHOLDER.fullmatch(m.group(0))
        if not pm or pm.group(1) not in PLACEHOLDERS or (pm.group(1) == "bin") != (pm.group(2) is not None):
            ctx.fail(where, f"unknown placeholder {m.group(0)!r} "
                            f"(valid: ${{port}}, ${{host}}, ${{tmp}}, ${{python}}, ${{peers}}, ${{bin:NAME}})")


def _str_list(ctx, where, v, key) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        ctx.fail(where, f"{key!r} must be a list of strings")
    return tuple(v)


def _str_table(ctx, where, v, key) -> dict:
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        ctx.fail(where, f"{key!r} must be a table of strings")
    return dict(v)


def _version(ctx, where, v) -> Version:
    _check_keys(ctx, where + ".version", v, (), ("dist", "command", "text"))
    if len(v) != 1:
        ctx.fail(where + ".version", "give exactly one of 'dist', 'command' or 'text'")
    if "command" in v:
        cmd = _str_list(ctx, where + ".version", v["command"], "command")
        for t in cmd:
            _placeholders(ctx, where + ".version", t)
        return Version(command=cmd)
    if "dist" in v:
        return Version(dist=_str(ctx, where + ".version", v["dist"], "dist"))
    return Version(text=_str(ctx, where + ".version", v["text"], "text"))


def _url(ctx, where, v, key, schemes) -> str:
    _str(ctx, where, v, key)
    _placeholders(ctx, where, v)
    if not any(v.startswith(s + "://") for s in schemes):
        ctx.fail(where, f"{key} {v!r} must start with {' or '.join(s + '://' for s in schemes)}")
    return v


def _system(ctx, where, t, *, roles=ROLES) -> System:
    _check_keys(ctx, where, t, ("name",),
                ("command", "ready", "url", "role", "description", "env", "cwd", "metrics", "files", "version",
                 "ready_timeout_s", "suites", "workloads", "tls"))
    name = _name(ctx, where, t["name"])
    where = f"{where} {name!r}"
    role = _enum(ctx, where, t.get("role", "peer"), "role", roles)
    url = t.get("url")
    if url is not None:
        # Bring your own: a server the bench only loads (and measures no CPU or memory of).
        if roles != ROLES:
            ctx.fail(where, "'url' is for the systems of a server scenario")
        for k in ("command", "env", "cwd", "files"):
            if k in t:
                ctx.fail(where, f"a system given by 'url' is already running: drop {k!r}")
        url = _url(ctx, where, url, "url", ("http",)).rstrip("/")
        if "://" in url[7:] or url.count("/") > 2:
            ctx.fail(where, f"url {url!r} must be a base URL without a path (the workloads give the paths)")
        if "$" in url:
            ctx.fail(where, "a system given by 'url' takes no placeholders")
    elif "command" not in t or "ready" not in t:
        ctx.fail(where, "give 'command' and 'ready' (a system the bench starts) or 'url' (one already running)")
    command = _str_list(ctx, where, t.get("command", []), "command")
    if url is None and not command:
        ctx.fail(where, "'command' must not be empty")
    for c in command:
        _placeholders(ctx, where, c)
    env = _str_table(ctx, where, t.get("env", {}), "env")
    files = _str_table(ctx, where, t.get("files", {}), "files")
    for k, v in list(env.items()) + list(files.items()):
        _placeholders(ctx, where, v)
    for fname in files:
        if "/" in fname or fname in ("", ".", ".."):
            ctx.fail(where, f"file name {fname!r} must be a plain name (it is written into ${{tmp}})")
    cwd = t.get("cwd")
    if cwd is not None:
        _placeholders(ctx, where, _str(ctx, where, cwd, "cwd"))
    suites = _str_list(ctx, where, t.get("suites", list(SUITES)), "suites")
    for s in suites:
        _enum(ctx, where, s, "suite", SUITES)
    if role == "service" and set(suites) != set(SUITES):
        ctx.fail(where, "the service runs in every suite: drop its 'suites'")
    timeout = t.get("ready_timeout_s", 30.0)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= 600:
        ctx.fail(where, "'ready_timeout_s' must be a number in (0, 600]")
    workloads = None
    if "workloads" in t:
        if roles != ROLES:
            ctx.fail(where, "'workloads' is for the systems of a server scenario")
        workloads = _str_list(ctx, where, t["workloads"], "workloads")
        if not workloads:
            ctx.fail(where, "'workloads' must name at least one workload (leave it out for all)")
    tls = t.get("tls", False)
    if not isinstance(tls, bool):
        ctx.fail(where, "'tls' must be true or false")
    client_server = roles == ("peer",)  # the local server of a client scenario
    if tls and url is not None:
        ctx.fail(where, "'tls' is for systems that the bench starts")
    if tls and not client_server and not str(t.get("ready", "")).startswith("tcp://"):
        ctx.fail(where, "a 'tls' system is ready when it accepts connections: give a tcp:// 'ready'")
    texts = list(command) + list(env.values()) + list(files.values())
    if any("${tls_" in v for v in texts) and not tls:
        ctx.fail(where, "${tls_cert}, ${tls_key} and ${tls_port} are for systems with tls = true")
    if not client_server and any("${tls_port}" in v for v in texts):
        ctx.fail(where, "${tls_port} is for the server of a client scenario (a system serves https on ${port})")
    return System(
        name=name, role=role, command=command, url=url, tls=tls,
        ready=_url(ctx, where, t.get("ready") or _tcp_of(url), "ready", ("http", "tcp")),
        description=_str(ctx, where, t.get("description", ""), "description", empty_ok=True),
        env=env, cwd=cwd,
        metrics=_url(ctx, where, t["metrics"], "metrics", ("http",)) if "metrics" in t else None,
        files=files,
        version=_version(ctx, where, t["version"]) if "version" in t else Version(),
        ready_timeout_s=float(timeout),
        suites=suites,
        workloads=workloads,
    )


def _tcp_of(url: str) -> str:
    """tcp://host:port of an http:// base URL: a running system is ready when it accepts connections."""
    hostport = url.split("://", 1)[1]
    return f"tcp://{hostport}" if ":" in hostport.rsplit("]", 1)[-1] else f"tcp://{hostport}:80"


def _workload(ctx, where, t, kind) -> Workload:
    opt = ("mode", "method", "path", "body", "headers", "connections", "suites", "slo_p99", "tls")
    _check_keys(ctx, where, t, ("name",), opt)
    name = _name(ctx, where, t["name"])
    where = f"{where} {name!r}"
    mode = _enum(ctx, where, t.get("mode", "http"), "mode", MODES)
    if kind == "client" and mode != "http":
        ctx.fail(where, "client scenarios support mode 'http' only")
    method = _str(ctx, where, t.get("method", "GET" if mode == "http" else "JSON-RPC"), "method")
    if mode == "http" and not _HTTP_METHOD.match(method):
        ctx.fail(where, f"method {method!r} must be an upper-case HTTP method such as GET or POST")
    path = _str(ctx, where, t.get("path", "/"), "path")
    if not path.startswith("/"):
        ctx.fail(where, f"path {path!r} must start with '/'")
    body = t.get("body")
    if body is not None:
        _str(ctx, where, body, "body", empty_ok=True)
    if mode == "ws":
        import json
        try:
            call = json.loads(body or "")
        except ValueError:
            ctx.fail(where, "a ws workload needs 'body': the JSON-RPC call as a JSON object")
        if not isinstance(call, dict) or not isinstance(call.get("method"), str):
            ctx.fail(where, "the ws 'body' must be a JSON object with a string \"method\"")
    conns = t.get("connections", 16)
    if not isinstance(conns, int) or isinstance(conns, bool) or not 1 <= conns <= 10000:
        ctx.fail(where, "'connections' must be an integer in [1, 10000]")
    suites = _str_list(ctx, where, t.get("suites", list(SUITES)), "suites")
    for s in suites:
        _enum(ctx, where, s, "suite", SUITES)
    headers = _str_list(ctx, where, t.get("headers", []), "headers")
    for h in headers:
        if ":" not in h:
            ctx.fail(where, f"header {h!r} must look like 'Name: value'")
    slo = DEFAULT_SLO_P99_US
    if "slo_p99" in t:
        if kind != "server":
            ctx.fail(where, "'slo_p99' is for the workloads of a server scenario")
        slo = _duration_us(ctx, where, t["slo_p99"], "slo_p99")
    tls = t.get("tls", False)
    if not isinstance(tls, bool):
        ctx.fail(where, "'tls' must be true or false")
    if tls and kind != "client":
        ctx.fail(where, "a workload's 'tls' is for client scenarios (a server scenario's system says tls = true)")
    return Workload(name=name, mode=mode, method=method, path=path, body=body, headers=headers,
                    connections=conns, suites=suites, slo_p99_us=slo, tls=tls)


def _duration_us(ctx, where, v, key) -> int:
    """A duration such as "10ms", "500us" or "1.5s", in whole microseconds (> 0)."""
    m = _DURATION.match(v) if isinstance(v, str) else None
    if not m:
        ctx.fail(where, f"{key} {v!r} must be a duration with a unit, such as \"10ms\", \"500us\" or \"1s\"")
    us = round(float(m.group(1)) * {"us": 1, "µs": 1, "ms": 1000, "s": 1_000_000}[m.group(2)])
    if not 0 < us <= 600_000_000:
        ctx.fail(where, f"{key} {v!r} must be between 1us and 600s")
    return us


def _build(ctx, where, t, env: str) -> str:
    if "build" not in t:
        return ""
    if not env:
        ctx.fail(where, "'build' needs an 'environment' (the folder that command builds)")
    return _str(ctx, where, t["build"], "build")


def _client(ctx, where, t) -> Client:
    _check_keys(ctx, where, t, ("name", "client"), ("role", "description", "version", "environment", "build"))
    name = _name(ctx, where, t["name"])
    where = f"{where} {name!r}"
    env = t.get("environment", "")
    if not isinstance(env, str) or (env and not _ENV_NAME.match(env)):
        ctx.fail(where, f"environment {env!r} must be a repository name such as 'pypi_niquests'")
    return Client(
        name=name,
        role=_enum(ctx, where, t.get("role", "peer"), "role", ROLES),
        client=_enum(ctx, where, t["client"], "client", CLIENTS),
        description=_str(ctx, where, t.get("description", ""), "description", empty_ok=True),
        version=_version(ctx, where, t["version"]) if "version" in t else Version(),
        environment=env,
        build=_build(ctx, where, t, env),
    )


def _unique(ctx, where, names: list[str], what: str) -> None:
    seen = set()
    for n in names:
        if n in seen:
            ctx.fail(where, f"duplicate {what} name {n!r}")
        seen.add(n)


def _check_served(ctx, systems: tuple[System, ...], workloads: tuple[Workload, ...]) -> None:
    """A system's ``workloads`` name workloads of the scenario; the service serves every one of them (it is
    what every workload compares)."""
    names = [w.name for w in workloads]
    for i, s in enumerate(systems):
        if s.workloads is None:
            continue
        where = f"systems[{i}] {s.name!r}"
        for n in s.workloads:
            if n not in names:
                ctx.fail(where, f"unknown workload {n!r} in 'workloads' (valid: {', '.join(names)})")
        if s.role == "service":
            ctx.fail(where, "the service serves every workload: drop its 'workloads'")


def load_file(path: str) -> Scenario:
    """Parse and validate one scenario file; raise ScenarioError with the file and the reason."""
    ctx = _Ctx(path)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    stem = os.path.splitext(os.path.basename(path))[0]
    _check_keys(ctx, "top level", doc, ("name", "kind", "workloads"),
                ("description", "systems", "server", "clients", "rate_reference"))
    name = _name(ctx, "top level", doc["name"])
    if name != stem:
        ctx.fail("top level", f"name {name!r} must match the file name {stem!r}")
    kind = _enum(ctx, "top level", doc["kind"], "kind", KINDS)
    wl = doc["workloads"]
    if not isinstance(wl, list) or not wl:
        ctx.fail("workloads", "give at least one [[workloads]] table")
    workloads = tuple(_workload(ctx, f"workloads[{i}]", t, kind) for i, t in enumerate(wl))
    _unique(ctx, "workloads", [w.name for w in workloads], "workload")
    desc = _str(ctx, "top level", doc.get("description", ""), "description", empty_ok=True)
    if kind == "server":
        for k in ("server", "clients"):
            if k in doc:
                ctx.fail("top level", f"{k!r} belongs to client scenarios (this one has kind = 'server')")
        sl = doc.get("systems")
        if not isinstance(sl, list) or not sl:
            ctx.fail("systems", "a server scenario needs at least one [[systems]] table")
        systems = tuple(_system(ctx, f"systems[{i}]", t) for i, t in enumerate(sl))
        _unique(ctx, "systems", [s.name for s in systems], "system")
        if sum(s.role == "service" for s in systems) != 1:
            ctx.fail("systems", "exactly one system must have role = 'service'")
        _check_served(ctx, systems, workloads)
        ref = doc.get("rate_reference")
        if ref is not None:
            _enum(ctx, "top level", _str(ctx, "top level", ref, "rate_reference"), "rate_reference",
                  [s.name for s in systems])
        return Scenario(name=name, kind=kind, description=desc, path=path, systems=systems, workloads=workloads,
                        rate_reference=ref)
    for k in ("systems", "rate_reference"):
        if k in doc:
            ctx.fail("top level", f"{k!r} belongs to server scenarios (this one has kind = 'client')")
    if "server" not in doc:
        ctx.fail("top level", "a client scenario needs a [server] table (the local server the clients hit)")
    server = _system(ctx, "server", doc["server"], roles=("peer",))
    if any(w.tls for w in workloads) and not server.tls:
        ctx.fail("workloads", "a workload with tls = true needs a [server] with tls = true")
    cl = doc.get("clients")
    if not isinstance(cl, list) or not cl:
        ctx.fail("clients", "a client scenario needs at least one [[clients]] table")
    clients = tuple(_client(ctx, f"clients[{i}]", t) for i, t in enumerate(cl))
    _unique(ctx, "clients", [c.name for c in clients], "client")
    if sum(c.role == "service" for c in clients) != 1:
        ctx.fail("clients", "exactly one client must have role = 'service'")
    return Scenario(name=name, kind=kind, description=desc, path=path, server=server, clients=clients,
                    workloads=workloads)


def default_dir() -> str:
    """perfkit/scenarios next to this package."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios")


class Registry:
    """All scenarios of a folder, by name."""

    def __init__(self, scenarios: list[Scenario]):
        self.scenarios = {s.name: s for s in scenarios}

    @classmethod
    def load(cls, directory: str | None = None) -> "Registry":
        directory = directory or default_dir()
        if not os.path.isdir(directory):
            raise ScenarioError(f"scenario folder {directory} does not exist")
        files = sorted(f for f in os.listdir(directory) if f.endswith(".toml"))
        return cls([load_file(os.path.join(directory, f)) for f in files])

    def names(self) -> list[str]:
        return sorted(self.scenarios)

    def get(self, name: str) -> Scenario:
        if name not in self.scenarios:
            raise ScenarioError(f"unknown scenario {name!r} (valid: {', '.join(self.names()) or 'none registered'})")
        return self.scenarios[name]

    def select(self, only: list[str] | None) -> list[tuple[Scenario, list[str] | None]]:
        """Resolve ``--only`` names: ``SCENARIO`` or ``SCENARIO/SYSTEM`` (or a bare system name).

        Returns (scenario, systems to run or None for all). Unknown names raise ScenarioError listing
        the valid ones."""
        if not only:
            return [(self.scenarios[n], None) for n in self.names()]
        picked: dict[str, set[str] | None] = {}
        for item in only:
            if "/" in item:
                sname, member = item.split("/", 1)
                sc = self.get(sname)
                if member not in sc.member_names():
                    raise ScenarioError(f"unknown system {member!r} in scenario {sname!r} "
                                        f"(valid: {', '.join(sc.member_names())})")
                if picked.get(sname, set()) is not None:
                    picked.setdefault(sname, set()).add(member)
                continue
            if item in self.scenarios:
                picked[item] = None
                continue
            owners = [s for s in self.scenarios.values() if item in s.member_names()]
            if not owners:
                valid = self.names() + sorted({f"{s.name}/{m}" for s in self.scenarios.values()
                                               for m in s.member_names()})
                raise ScenarioError(f"unknown scenario or system {item!r} (valid: {', '.join(valid)})")
            for sc in owners:
                if picked.get(sc.name, set()) is not None:
                    picked.setdefault(sc.name, set()).add(item)
        out = []
        for n in self.names():
            if n in picked:
                members = picked[n]
                out.append((self.scenarios[n], None if members is None else
                            [m for m in self.scenarios[n].member_names() if m in members]))
        return out


def substitute(text: str, values: dict, bins: dict) -> str:
    """Fill the ``${...}`` placeholders of ``text``; a missing binary raises KeyError(name)."""

    def repl(m):
        key, arg = m.group(1), m.group(2)
        if key == "bin":
            return bins[arg]
        return str(values[key])

    return _PLACEHOLDER.sub(repl, text)
