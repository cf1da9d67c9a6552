"""A pytest plugin (`-p _rx_bind`) that binds `requests` to requestx_client before requests' suite is collected.

`requests` and each submodule requestx_client has become requestx_client's modules in sys.modules. A submodule
it lacks becomes a stub module, and a name that the suite's files import (`from requests.x import name`, found
with ast) but requestx_client's module lacks becomes a stub object. A stub raises NotImplementedError naming
what is missing when it is called or an attribute of it is read, so only the tests that use it fail.
Used by run_requests_suite.py; nothing here changes requestx_client's code.
"""
import ast
import importlib
import pathlib
import sys
import types

import requestx_client

SUBMODULES = [
    "exceptions", "structures", "cookies", "auth", "adapters", "models", "sessions", "status_codes",
    "utils", "hooks", "compat", "api", "_internal_utils", "help", "packages", "certs",
]

MISSING = {}  # dotted name -> "stub module" | "stub name", reported by the harness


class _Missing:
    def __init__(self, what):
        object.__setattr__(self, "_what", what)

    def _fail(self, *_a, **_k):
        raise NotImplementedError("requestx_client has no %s" % object.__getattribute__(self, "_what"))

    __call__ = _fail

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._fail()

    def __mro_entries__(self, bases):
        # used as a base class (`class S(SessionRedirectMixin)`): a class whose instances cannot be made
        fail = self._fail
        return (type("Missing", (), {"__init__": lambda self, *a, **k: fail()}),)

    def __repr__(self):
        return "<missing %s>" % object.__getattribute__(self, "_what")


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Missing("%s.%s" % (self.__name__, name))


def _bind():
    sys.modules["requests"] = requestx_client
    for sub in SUBMODULES:
        name = "requests." + sub
        try:
            mod = importlib.import_module("requestx_client." + sub)
        except ImportError:
            mod = _StubModule(name)
            MISSING[name] = "stub module"
        sys.modules[name] = mod
        if not hasattr(requestx_client, sub):
            setattr(requestx_client, sub, mod)


def _stub_imported_names(test_dir):
    for path in sorted(pathlib.Path(test_dir).glob("*.py")):
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                    node.module == "requests" or node.module.startswith("requests.")):
                mod = sys.modules.get(node.module)
                if mod is None or isinstance(mod, _StubModule):
                    continue
                for alias in node.names:
                    if alias.name != "*" and not hasattr(mod, alias.name) and \
                            ("%s.%s" % (node.module, alias.name)) not in sys.modules:
                        setattr(mod, alias.name, _Missing("%s.%s" % (node.module, alias.name)))
                        MISSING["%s.%s" % (node.module, alias.name)] = "stub name"


_bind()
_stub_imported_names(pathlib.Path.cwd() / "tests")


def pytest_report_header(config):
    return "requests -> requestx_client; stubs for what it lacks: %s" % (", ".join(sorted(MISSING)) or "none")
