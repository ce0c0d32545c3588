"""Shared fixtures of the pytest suite of `cvm_engine`: the repository's paths, one runtime
for the session, and the outcome hashes `cvm audit --json` gives for every fixture case."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Dict, Optional

import pytest

import cvm_engine

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures"


def cvm_binary() -> Optional[Path]:
    """The `cvm` tool to compare with: $CVM_BIN, else a build in the workspace's target."""
    named = os.environ.get("CVM_BIN")
    if named:
        return Path(named)
    for profile in ("debug", "release"):
        candidate = ROOT / "target" / profile / "cvm"
        if candidate.is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def runtime() -> cvm_engine.Runtime:
    """One runtime for the session: the engine compiles once."""
    return cvm_engine.Runtime()


@pytest.fixture(scope="session")
def cli_hashes() -> Dict[str, dict]:
    """Every fixture case's row of `cvm audit --json` (both engines), by case name."""
    binary = cvm_binary()
    if binary is None:
        pytest.skip("no cvm binary: set CVM_BIN or build it (cargo build --bin cvm)")
    if not binary.is_file():
        pytest.fail(f"CVM_BIN={binary}: no such file")
    completed = subprocess.run(
        [str(binary), "audit", "--json", "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        items = json.loads(completed.stdout)["fixtures"]
    except (ValueError, KeyError) as error:
        pytest.fail(f"cvm audit --json: {error}: {completed.stderr[-2000:]}")
    rows: Dict[str, dict] = {row["fixture"]: row for row in items}
    if not rows:
        pytest.fail(f"cvm audit printed no rows: {completed.stderr[-2000:]}")
    return rows
