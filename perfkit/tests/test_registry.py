"""The registry loads and validates every scenario file; bad files and bad names get clear errors."""

import os
import re

import pytest
from conftest import PERFKIT_DIR, run_cli

from perfkit.scenarios import Registry, ScenarioError, load_file

SCENARIOS = os.path.join(PERFKIT_DIR, "scenarios")
GOOD = '''
name = "{name}"
kind = "server"
[[systems]]
name = "svc"
role = "service"
command = ["${{python}}", "-m", "http.server", "${{port}}"]
ready = "http://127.0.0.1:${{port}}/"
[[workloads]]
name = "root"
path = "/"
'''


def test_every_scenario_file_loads_and_validates():
    files = sorted(f for f in os.listdir(SCENARIOS) if f.endswith(".toml"))
    assert files, "no scenario files"
    reg = Registry.load(SCENARIOS)
    assert reg.names() == [f[:-5] for f in files]
    for name in reg.names():
        sc = reg.get(name)
        roles = [m.role for m in sc.members()]
        assert roles.count("service") == 1, name
        assert len(roles) >= 2, f"{name} is compared with nothing"
        assert sc.workloads_for("quick"), f"{name} has no quick workload"
        assert set(sc.workloads_for("quick")) <= set(sc.workloads_for("full")) | set(sc.workloads_for("quick"))
    # the four services of the repo are registered, with their peers
    assert {"aquilia_app", "aurora_app", "rpc_app", "requestx_client"} <= set(reg.names())
    aq = reg.get("aquilia_app")
    assert {"aquilia", "sanic", "sanic-w2", "fastapi", "blacksheep", "litestar", "falcon",
            "raw-asgi-granian"} <= set(aq.member_names())
    assert {s.name for s in aq.systems if s.role == "variant"} == {
        "aquilia_app-nometrics", "aquilia_app-asgi", "aquilia_app-uvicorn", "aquilia_app-w2"}
    assert [w.name for w in aq.workloads_for("quick")] == ["json"]  # the quick suite stays short
    assert {"ping", "json", "json-large", "html", "stream", "items-post", "page", "ws-echo"} <= {
        w.name for w in aq.workloads_for("full")}
    # the original serves the classic five only, the floors those and the WebSocket echo (each server's
    # WebSocket floor); everything else serves every workload
    classic = {"json", "ping", "json-large", "html", "ping-c16"}
    for s in aq.systems:
        expected = {w.name for w in aq.workloads}
        if s.name == "aquilia":
            expected = classic
        elif s.role == "floor":
            expected = classic | {"ws-echo"}
        assert {w.name for w in aq.workloads if s.serves(w.name)} == expected, s.name
    assert "nginx" in reg.get("aurora_app").member_names()
    assert {s.name for s in reg.get("aurora_app").systems if s.tls} == {"aurora_app-tls", "nginx-tls"}
    assert [s.name for s in reg.get("aurora_app").systems if s.role == "floor"] == ["hyper"]
    assert reg.get("rpc_app").workloads[0].mode == "ws"
    assert reg.get("requestx_client").kind == "client"
    assert reg.get("requestx_client").server.name == "nginx"


def test_peer_app_files_named_by_the_scenarios_exist():
    reg = Registry.load(SCENARIOS)
    for sc in reg.scenarios.values():
        for s in sc.systems:
            for part in s.command:
                if part.startswith("${peers}/"):
                    assert os.path.exists(os.path.join(PERFKIT_DIR, "peers", part.split("/", 1)[1])), part
                if part.endswith(":app") and "${peers}" in s.command:
                    assert os.path.exists(os.path.join(PERFKIT_DIR, "peers", part.split(":")[0] + ".py")), part


WITH_PEER = '''
[[systems]]
name = "peer"
command = ["${{python}}", "-m", "http.server", "${{port}}"]
ready = "http://127.0.0.1:${{port}}/"
workloads = WORKLOADS
'''


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace('kind = "server"', 'kind = "serverr"'), "kind 'serverr' is not valid (valid: server, client)"),
    (lambda t: t.replace('role = "service"', 'role = "boss"'), "role 'boss' is not valid"),
    (lambda t: t.replace('role = "service"', 'role = "peer"'), "exactly one system must have role = 'service'"),
    (lambda t: t.replace('ready = "http://', 'ready = "ftp://'), "must start with http:// or tcp://"),
    (lambda t: t.replace('path = "/"', 'path = "/"\nconections = 3'), "unknown key 'conections'"),
    (lambda t: t.replace("${{port}}/", "${{prot}}/"), "unknown placeholder '${prot}'"),
    (lambda t: t.replace('command = ["${{python}}", "-m", "http.server", "${{port}}"]', 'command = "python"'),
     "'command' must be a list of strings"),
    (lambda t: t.replace('name = "{name}"', 'name = "other"'), "must match the file name"),
    (lambda t: t + "\n[[workloads]]\nname = \"root\"\n", "duplicate workload name 'root'"),
    (lambda t: t.replace('path = "/"', 'path = "/"\nmode = "ws"'), "a ws workload needs 'body'"),
    (lambda t: t.replace("[[workloads]]", "[[workloads]]\nconnections = 0"), "'connections' must be an integer"),
    (lambda t: t + "\n[server]\nname='x'\n", "'server' belongs to client scenarios"),
    (lambda t: t.replace("[[systems]]", "[[systems]"), "not valid TOML"),
    (lambda t: t.replace('kind = "server"', 'kind = "server"\nrate_reference = "nginx"'),
     "rate_reference 'nginx' is not valid (valid: svc)"),
    (lambda t: t.replace('role = "service"', 'role = "service"\nworkloads = ["root"]'),
     "the service serves every workload: drop its 'workloads'"),
    (lambda t: t + WITH_PEER.replace("WORKLOADS", '["rooot"]'), "unknown workload 'rooot' in 'workloads' (valid: root)"),
    (lambda t: t + WITH_PEER.replace("WORKLOADS", "[]"), "'workloads' must name at least one workload"),
    (lambda t: t + WITH_PEER.replace("WORKLOADS", '"root"'), "'workloads' must be a list of strings"),
    (lambda t: t.replace('role = "service"', 'role = "service"\ntls = "yes"'), "'tls' must be true or false"),
    (lambda t: t.replace('role = "service"', 'role = "service"\ntls = true'),
     "a 'tls' system is ready when it accepts connections: give a tcp:// 'ready'"),
    (lambda t: t.replace('"${{port}}"]', '"${{port}}", "${{tls_cert}}"]'),
     "${tls_cert}, ${tls_key} and ${tls_port} are for systems with tls = true"),
    (lambda t: t.replace('role = "service"', 'role = "service"\ntls = true').replace(
        '"${{port}}"]', '"${{port}}", "${{tls_port}}"]').replace('ready = "http', 'ready = "tcp'),
     "${tls_port} is for the server of a client scenario"),
])
def test_bad_scenario_file_gives_a_clear_error(tmp_path, mutate, message):
    path = tmp_path / "bad.toml"
    path.write_text(mutate(GOOD).format(name="bad"))
    with pytest.raises(ScenarioError) as e:
        load_file(str(path))
    assert str(path) in str(e.value)
    assert message in str(e.value)


def test_good_template_is_valid(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(GOOD.format(name="good"))
    sc = load_file(str(path))
    assert sc.systems[0].name == "svc" and sc.workloads[0].connections == 16


def test_unknown_names_list_the_valid_ones():
    reg = Registry.load(SCENARIOS)
    with pytest.raises(ScenarioError, match=r"unknown scenario or system 'nope' \(valid: aquilia_app, aurora_app"):
        reg.select(["nope"])
    with pytest.raises(ScenarioError, match=r"unknown system 'nope' in scenario 'aurora_app' \(valid: aurora_app, aurora_app-w2, aurora_app-offload4, aurora_app-nometrics, nginx, aurora_app-tls, nginx-tls, hyper, hyper-metrics\)"):
        reg.select(["aurora_app/nope"])
    picked = reg.select(["sanic", "rpc_app"])
    assert [(sc.name, m) for sc, m in picked] == [("aquilia_app", ["sanic"]), ("rpc_app", None)]


def test_cli_list_and_bad_input():
    r = run_cli(["--list"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert "aurora_app (server)" in r.stdout and "service  aquilia_app" in r.stdout
    r = run_cli(["--only", "nosuch"], timeout=60)
    assert r.returncode == 2
    assert "unknown scenario or system 'nosuch' (valid: aquilia_app" in r.stderr
    r = run_cli(["--repeat", "0"], timeout=60)
    assert r.returncode == 2 and "--repeat must be between 1 and 100" in r.stderr
    r = run_cli(["--only", "aurora_app", "--bin", "perfkit-load=/nonexistent/perfkit-load"], timeout=60)
    assert r.returncode == 2 and "is not an executable file" in r.stderr


def test_a_broken_scenario_folder_is_reported_by_the_cli(tmp_path):
    (tmp_path / "x.toml").write_text("name = 'x'\nkind = 'server'\n")
    r = run_cli(["--scenarios", str(tmp_path), "--list"], timeout=60)
    assert r.returncode == 2
    assert "x.toml: top level: missing required key 'workloads'" in r.stderr


def test_rate_reference_sets_the_constant_rates():
    """The scenario's rate_reference system sets the rates; without one (or if it failed), the slowest does."""
    from perfkit.progress import Progress
    from perfkit.runner import ServerRun, Settings

    reg = Registry.load(SCENARIOS)
    assert reg.get("aquilia_app").rate_reference == "sanic"
    assert reg.get("aurora_app").rate_reference == "nginx"
    run = ServerRun(reg.get("aquilia_app"), None, Settings(), Progress(quiet=True))
    maxes = {"aquilia_app": 9000.0, "sanic": 4000.0, "fastapi": 1500.0}
    assert run._rate_reference(maxes) == ("sanic", 4000.0)
    del maxes["sanic"]
    assert run._rate_reference(maxes) == ("fastapi", 1500.0)


def test_niquests_runs_in_its_own_environment():
    """The scenario gives niquests the pypi_niquests environment; the interpreter the bench starts for it sees
    urllib3-future as `urllib3`, and nothing of the bench's own environment (whose urllib3 is the real one)."""
    import importlib.metadata
    import json
    import subprocess

    from perfkit import clients

    sc = Registry.load(SCENARIOS).get("requestx_client")
    envs = {c.name: c.environment for c in sc.clients}
    assert envs["niquests"] == "pypi_niquests" and envs["requests"] == ""
    builds = {c.name: c.build for c in sc.clients}
    assert builds["requestx"].startswith("perfkit/peers/build_requestx_original.sh ${python}")
    script = os.path.join(PERFKIT_DIR, "peers", "build_requestx_original.sh")
    assert os.access(script, os.X_OK), script
    assert subprocess.run(["bash", "-n", script]).returncode == 0  # at least it parses
    # this process is the main environment: real urllib3, no niquests
    assert set(importlib.metadata.packages_distributions()["urllib3"]) == {"urllib3"}
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("niquests")

    cmd, env = clients.driver_command("niquests", "pypi_niquests")
    assert env["PYTHONPATH"] == clients.environment_site("pypi_niquests")
    probe = ("import importlib.metadata as m, json, sys, urllib3, niquests, hdrh.histogram\n"
             "print(json.dumps({'owner': m.packages_distributions()['urllib3'], 'version': urllib3.__version__,"
             " 'future': m.version('urllib3-future'),"
             " 'requests': __import__('importlib.util').util.find_spec('requests') is not None,"
             " 'path': sys.path}))")
    interp = cmd[:cmd.index(clients.DRIVER)]
    out = subprocess.run(interp + ["-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["owner"] == ["urllib3-future"], seen
    assert seen["version"] == seen["future"] != importlib.metadata.version("urllib3"), seen
    assert not seen["requests"], "the bench's environment leaked into niquests' interpreter"
    assert not any(os.path.isdir(os.path.join(p, "requests")) for p in seen["path"]), seen["path"]


def test_a_missing_environment_is_a_clear_driver_error(monkeypatch):
    from perfkit import clients

    monkeypatch.delenv("PERFKIT_ENV_PYPI_NOPE", raising=False)
    with pytest.raises(clients.DriverError, match="environment pypi_nope not found"):
        clients.driver_command("niquests", "pypi_nope")


def test_environment_must_be_a_repository_name(tmp_path):
    text = '''
name = "c"
kind = "client"
[server]
name = "s"
command = ["${python}", "-m", "http.server", "${port}"]
ready = "http://127.0.0.1:${port}/"
[[clients]]
name = "niquests"
role = "service"
client = "niquests"
environment = "../elsewhere"
[[workloads]]
name = "root"
path = "/"
'''
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match="environment '../elsewhere' must be a repository name"):
        load_file(str(path))
    path.write_text(text.replace('environment = "../elsewhere"', 'build = "make it"'))
    with pytest.raises(ScenarioError, match="'build' needs an 'environment'"):
        load_file(str(path))


def test_systems_can_be_limited_to_a_suite(tmp_path):
    """A system with suites = ["full"] is left out of the quick suite unless named with --only; the service
    must run in every suite."""
    from perfkit.progress import Progress
    from perfkit.runner import ServerRun, Settings

    text = GOOD.format(name="suited") + '''
[[systems]]
name = "extra"
suites = ["full"]
command = ["${python}", "-m", "http.server", "${port}"]
ready = "http://127.0.0.1:${port}/"
'''
    path = tmp_path / "suited.toml"
    path.write_text(text)
    sc = load_file(str(path))
    names = lambda run: [st.system.name for st in run.started]  # noqa: E731
    assert names(ServerRun(sc, None, Settings(suite="quick"), Progress(quiet=True))) == ["svc"]
    assert names(ServerRun(sc, None, Settings(suite="full"), Progress(quiet=True))) == ["svc", "extra"]
    assert names(ServerRun(sc, ["extra"], Settings(suite="quick"), Progress(quiet=True))) == ["extra"]
    path.write_text(text.replace('role = "service"', 'role = "service"\nsuites = ["full"]'))
    with pytest.raises(ScenarioError, match="the service runs in every suite"):
        load_file(str(path))


def test_a_variant_of_the_service_is_never_its_best_peer():
    from perfkit.report_md import summary_rows

    def res(rps):
        return {"max_rps": {"median": rps}}

    doc = {"scenarios": [{"name": "s", "kind": "server", "systems": [
        {"name": "svc", "role": "service"}, {"name": "svc-off", "role": "variant"},
        {"name": "peer", "role": "peer"}, {"name": "raw", "role": "floor"}],
        "workloads": [{"name": "w", "results": {"svc": res(100.0), "svc-off": res(120.0), "peer": res(50.0),
                                                "raw": res(110.0)}}]}]}
    row = summary_rows(doc)[0]
    assert row["best_peer"] == "peer" and row["vs_best_peer"] == 2.0
    assert row["floor"] == "raw" and abs(row["vs_floor"] - 100 / 110) < 1e-9


def test_a_workload_runs_only_against_the_systems_serving_it(tmp_path, monkeypatch):
    """A system's `workloads` keeps the others from being run against it (and from the progress count);
    paired and gate refuse a workload one of their systems does not serve."""
    from perfkit.cli import _paired_selection
    from perfkit.progress import Progress
    from perfkit.runner import ServerRun, Settings

    text = GOOD.format(name="served") + WITH_PEER.format().replace("WORKLOADS", '["root"]') + \
        '\n[[workloads]]\nname = "extra"\npath = "/extra"\n'
    (tmp_path / "served.toml").write_text(text)
    sc = load_file(str(tmp_path / "served.toml"))
    assert [s.name for s in sc.systems if s.serves("extra")] == ["svc"]
    run = ServerRun(sc, None, Settings(suite="full", repeat=1, search_steps=0), Progress(quiet=True))
    probed = {}
    monkeypatch.setattr(run, "_probes", lambda w, live, per, publish: probed.setdefault(
        w.name, [st.system.name for st in live]))
    for w in sc.workloads:
        run._workload(w)
    assert probed == {"root": ["svc", "peer"], "extra": ["svc"]}
    assert run.steps() == 2 + 3 * (1 + len(Settings().levels))  # 2 starts, 3 (system, workload) pairs
    reg = Registry([sc])
    assert _paired_selection(reg, "served/svc", "served/peer", "root")[3].name == "root"
    with pytest.raises(ScenarioError, match="system 'peer' does not serve workload 'extra' \\(its workloads: root\\)"):
        _paired_selection(reg, "served/svc", "served/peer", "extra")


def test_a_client_scenario_server_takes_no_workloads(tmp_path):
    text = '''
name = "c"
kind = "client"
[server]
name = "s"
command = ["${python}", "-m", "http.server", "${port}"]
ready = "http://127.0.0.1:${port}/"
workloads = ["root"]
[[clients]]
name = "requests"
role = "service"
client = "requests"
[[workloads]]
name = "root"
path = "/"
'''
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(ScenarioError, match="'workloads' is for the systems of a server scenario"):
        load_file(str(tmp_path / "c.toml"))


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace('path = "/"', 'path = "/"\ntls = true'),
     "a workload with tls = true needs a [server] with tls = true"),
    (lambda t: t.replace('path = "/"', 'path = "/"\ntls = 1'), "'tls' must be true or false"),
])
def test_tls_workloads_of_a_client_scenario_are_checked(tmp_path, mutate, message):
    text = '''
name = "c"
kind = "client"
description = "d"

[server]
name = "s"
command = ["x", "${port}"]
ready = "http://127.0.0.1:${port}/"

[[clients]]
name = "urllib3"
role = "service"
client = "urllib3"

[[workloads]]
name = "get"
path = "/"
'''
    path = tmp_path / "c.toml"
    path.write_text(mutate(text))
    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_file(str(path))


def test_requestx_client_scenario_has_https_rows():
    sc = Registry.load(SCENARIOS).get("requestx_client")
    assert sc.server.tls and any("${tls_port}" in text for text in sc.server.files.values())
    assert {w.name for w in sc.workloads if w.tls} == {"get-tls", "post-tls"}


def test_clients_verify_the_https_server_against_the_run_ca(tmp_path):
    """The driver of each client reaches an https server through the run's CA, and only through it."""
    import subprocess
    import sys

    from perfkit import clients, procs, runner
    from perfkit.scenarios import Workload

    cert, key, ca = runner.make_certificate(str(tmp_path))
    port = procs.free_port()
    peers = os.path.join(os.path.dirname(SCENARIOS), "peers")
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "raw_asgi:app", "--app-dir", peers, "--host",
                               "127.0.0.1", "--port", str(port), "--ssl-certfile", cert, "--ssl-keyfile", key,
                               "--log-level", "warning"])
    try:
        procs.wait_ready("https server", f"tcp://127.0.0.1:{port}", 20)
        url, w = f"https://127.0.0.1:{port}/ping", Workload(name="ping", path="/ping", tls=True)
        settings = runner.Settings(duration=0.3, warmup=0.1)
        for client in ("urllib3", "requests"):
            res = clients.drive(client, url, w, settings, cacert=ca)
            assert res["requests"] > 0 and res["errors"] == 0, (client, res)
            with pytest.raises(clients.DriverError, match="(?i)certificate"):
                clients.drive(client, url, w, settings)  # no CA given: verification fails, never skipped
    finally:
        server.terminate()
        server.wait(10)
