from aquilia import AppManifest

manifest = AppManifest(
    name="bench",
    version="1.0.0",
    description="the four routes every aquilia_app peer serves",
    controllers=["modules.bench.controllers:BenchController"],
    base_path="modules.bench",
    auto_discover=False,
)

__all__ = ["manifest"]
