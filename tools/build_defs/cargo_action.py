"""Runs one cargo build inside a Bazel action and copies out the artifact(s) Bazel declared.

Offline and frozen against the vendored crates; the target directory is persistent (outside the
sandbox) so that editing one crate recompiles only that crate. cargo's own lock on the target
directory serialises concurrent actions.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys


def cargo_env(args) -> dict:
    target = pathlib.Path(args.target_dir)
    home = target / "offline-cargo-home"
    home.mkdir(parents=True, exist_ok=True)
    vendor = pathlib.Path(args.vendor).resolve()
    config = (
        "[source.crates-io]\nreplace-with = 'vendored'\n"
        f"[source.vendored]\ndirectory = '{vendor}'\n"
        "[net]\noffline = true\n"
    )
    config_file = home / "config.toml"
    if not config_file.exists() or config_file.read_text() != config:
        tmp = home / f"config.toml.{os.getpid()}"
        tmp.write_text(config)
        tmp.replace(config_file)
    tool_dir = str(pathlib.Path(args.rustc).parent)
    # Test executables (one per tests/*.rs) skip the release profile's thin LTO: linking perfkit-load's
    # 13 with it took 592 s against 222 s without, and tests assert behaviour, not the last percent of
    # speed. "off" (no LTO within a crate either) built them in 201 s, 16 codegen units better than 4.
    test_profile = {"CARGO_PROFILE_RELEASE_LTO": "off", "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "16"}
    return {
        **(test_profile if args.mode == "test" else {}),
        "PATH": f"{tool_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "CARGO_HOME": str(home),
        "CARGO_TARGET_DIR": str(target),
        "RUSTC": args.rustc,
        "PYO3_PYTHON": args.python,
        "CARGO_TERM_COLOR": "never",
        "LANG": "C.UTF-8",
    }


def run_cargo(args, cargo_args) -> list:
    cmd = [args.cargo, *cargo_args, "--release", "--frozen", "--offline",
           "--manifest-path", args.manifest, "-p", args.crate, "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd, env=cargo_env(args), stdout=subprocess.PIPE, text=True)
    messages = []
    for line in proc.stdout.splitlines():
        try:
            messages.append(json.loads(line))
        except ValueError:
            print(line)
    if proc.returncode != 0:
        sys.exit(f"cargo_action: `cargo {' '.join(cargo_args)} -p {args.crate}` failed (exit {proc.returncode})")
    return [m for m in messages if m.get("reason") == "compiler-artifact"]


def copy(src: str, dst: pathlib.Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    dst.chmod(0o755)


def main() -> None:
    p = argparse.ArgumentParser()
    for flag in ("cargo", "rustc", "python", "vendor", "target-dir", "manifest", "crate", "mode", "out"):
        p.add_argument("--" + flag, required=True)
    p.add_argument("--name", default="")
    args = p.parse_args()
    out = pathlib.Path(args.out)

    if args.mode == "bin":
        artifacts = run_cargo(args, ["build", "--bin", args.name])
        exes = [a["executable"] for a in artifacts if a.get("executable") and a["target"]["name"] == args.name]
        if not exes:
            sys.exit(f"cargo_action: crate {args.crate} produced no binary named {args.name}")
        copy(exes[0], out)
    elif args.mode == "cdylib":
        artifacts = run_cargo(args, ["build", "--lib"])
        libs = [f for a in artifacts if "cdylib" in a["target"]["kind"] for f in a["filenames"] if f.endswith(".so")]
        if not libs:
            sys.exit(f"cargo_action: crate {args.crate} produced no cdylib (crate-type must include cdylib)")
        copy(libs[0], out)
    elif args.mode == "test":
        artifacts = run_cargo(args, ["test", "--no-run"])
        exes = [a for a in artifacts if a.get("executable") and a["profile"]["test"]]
        if not exes:
            sys.exit(f"cargo_action: crate {args.crate} has no test executables")
        out.mkdir(parents=True, exist_ok=True)
        for a in exes:
            kind = a["target"]["kind"][0]
            copy(a["executable"], out / f"{kind}-{a['target']['name']}")
    else:
        sys.exit(f"cargo_action: unknown mode {args.mode}")


if __name__ == "__main__":
    main()
