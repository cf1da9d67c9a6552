"""The original Aquilia framework's workspace for the perfkit peer.

What `aq init workspace NAME --minimal` and `aq add module bench` generate, cut down to the four routes
every aquilia_app peer serves: the scaffold's middleware preset (MiddlewareChain.minimal()) and core
integrations, plus templates; no database, no sessions, no starter page (the other peers have none).
It runs the way aquilia's generated Dockerfile does, on uvicorn through the framework's own entrypoint:

    AQUILIA_WORKSPACE=<this folder> AQUILIA_ENV=prod AQ_SECRET_KEY=... \
        python -m uvicorn aquilia.entrypoint:app --loop uvloop --http httptools ...

(from a scratch directory: the framework writes a .aquilia/ folder into its working directory).
"""
import importlib.util
import os

from aquilia import AquilaConfig, Module, Workspace
from aquilia.integrations import (
    DiIntegration,
    FaultHandlingIntegration,
    MiddlewareChain,
    PatternsIntegration,
    RoutingIntegration,
    TemplatesIntegration,
)

# /html renders aquilia_app's own template file, as every other peer does (found without importing it).
_AQUILIA_APP_HTML = os.path.join(importlib.util.find_spec("aquilia_app").submodule_search_locations[0], "html")


class BaseEnv(AquilaConfig):
    env = "prod"

    class server(AquilaConfig.Server):
        host = "127.0.0.1"
        port = 8000
        workers = 1
        reload = False


workspace = (
    Workspace(name="perfkit_peer", version="1.0.0", description="perfkit peer of aquilia_app")
    .env_config(BaseEnv)
    .middleware(MiddlewareChain.minimal())
    .module(Module("bench").route_prefix("/"))
    .integrate(DiIntegration(auto_wire=True))
    .integrate(RoutingIntegration(strict_matching=True))
    .integrate(FaultHandlingIntegration(default_strategy="propagate"))
    .integrate(PatternsIntegration())
    .integrate(TemplatesIntegration(search_paths=[_AQUILIA_APP_HTML]))
)

__all__ = ["workspace"]
