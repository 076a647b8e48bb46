"""The sdist's build backend: maturin's, with a clear message when there is no Rust.

pip builds the sdist only where no prebuilt wheel fits (scripts/targets lists the platforms that
have one). maturin's backend would then download a Rust toolchain into a temporary directory by
itself (puccinialin) when cargo is missing; herdless asks for an installed toolchain instead and
says so, before any toolchain is downloaded.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

import maturin
from maturin import *  # noqa: F403  (the PEP 517 hooks herdless does not wrap)

RUST = "1.88"  # the oldest Rust the crates build with (redis/Cargo.toml's rust-version)


def _cargo_version() -> str | None:
    cargo = shutil.which("cargo")
    if cargo is None:
        return None
    try:
        out = subprocess.run([cargo, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and "cargo" in out.stdout else None


def _need_cargo() -> None:
    # maturin's own switch: never download a toolchain, whatever happens below.
    os.environ["MATURIN_NO_INSTALL_RUST"] = "1"
    if _cargo_version() is not None:
        return
    here = f"{platform.system()} {platform.machine()}, {platform.python_implementation()} {platform.python_version()}"
    sys.stderr.write(
        "\n"
        f"herdless: pip is building herdless from source on {here} (no prebuilt\n"
        f"wheel fits it, or --no-binary asked so), which needs Rust {RUST} or newer: `cargo` is not on PATH.\n"
        "  - Install Rust (https://rustup.rs or your system's package manager), open a new shell\n"
        "    so that cargo is on PATH, and run the same pip command again; or\n"
        "  - use a platform with a prebuilt wheel (CPython 3.11+ on Linux x86-64/aarch64 with\n"
        "    glibc 2.17+ or musl 1.2+, macOS 10.12+ x86-64 / 11+ arm64, Windows x86-64).\n"
        "No Rust toolchain was downloaded.\n\n"
    )
    raise SystemExit(1)


def get_requires_for_build_wheel(config_settings=None):
    _need_cargo()
    return maturin.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(config_settings=None):
    _need_cargo()
    return maturin.get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _need_cargo()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    _need_cargo()
    return maturin.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _need_cargo()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _need_cargo()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)


def get_requires_for_build_sdist(config_settings=None):
    # An sdist is only repackaged (maturin needs cargo metadata for it, as ever).
    os.environ["MATURIN_NO_INSTALL_RUST"] = "1"
    return maturin.get_requires_for_build_sdist(config_settings)
