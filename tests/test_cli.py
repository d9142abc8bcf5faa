"""The command itself: ``hpsearch``, ``python -m hpsearch`` and ``python -m hpsearch.cli`` behave
alike, and ``--version`` (``-v``: also torch, optuna and ray) reads installed metadata only."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import hpsearch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("hpsearch")  # the console script pip installed next to this python

ENTRY_POINTS = {
    "console script": [str(SCRIPT)],
    "python -m hpsearch": [sys.executable, "-m", "hpsearch"],
    "python -m hpsearch.cli": [sys.executable, "-m", "hpsearch.cli"],
}


def run(entry: str, *args: str) -> subprocess.CompletedProcess[str]:
    if entry == "console script" and not SCRIPT.exists():
        pytest.skip(f"no console script at {SCRIPT}: hpsearch is not installed in this environment (pip install -e .)")
    return subprocess.run([*ENTRY_POINTS[entry], *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_version_prints_the_installed_version(entry: str) -> None:
    done = run(entry, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"hpsearch {hpsearch.__version__}\n"
    assert hpsearch.__version__ == version("hpsearch")  # the installed distribution, not the "0+unknown" fallback


@pytest.mark.parametrize("flags", [("--version", "-v"), ("-v", "--version"), ("--version", "-vv")])
def test_verbose_version_names_torch_optuna_and_ray(flags: tuple[str, ...]) -> None:
    done = run("python -m hpsearch", *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"hpsearch {hpsearch.__version__}",
        *(f"{name} {version(name)}" for name in ("torch", "optuna", "ray")),
    ]


def test_version_imports_neither_torch_nor_ray() -> None:
    """The versions come from package metadata: importing torch and ray would cost seconds."""
    code = (
        "import sys; from hpsearch.cli import main; code = main(['--version', '-v']); "
        "print(code, sorted(m for m in ('torch', 'ray', 'optuna') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"


def test_v_without_version_is_a_usage_error() -> None:
    done = run("python -m hpsearch", "-v")
    assert done.returncode == 2
    assert done.stderr == "hpsearch: error: -v goes with --version: hpsearch --version -v\n"


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_no_command_is_a_usage_error(entry: str) -> None:
    done = run(entry)
    assert done.returncode == 2
    assert done.stderr == "hpsearch: error: the following arguments are required: command\n"


def test_python_m_hpsearch_is_the_console_script() -> None:
    """Same help, same one-line error and exit code for a bad spec, whichever way hpsearch is started."""
    helps = {entry: run(entry, "--help") for entry in ("console script", "python -m hpsearch")}
    assert {h.returncode for h in helps.values()} == {0}
    assert helps["console script"].stdout == helps["python -m hpsearch"].stdout
    assert "--version" in helps["python -m hpsearch"].stdout and "torch, optuna and ray" in helps["python -m hpsearch"].stdout
    missing = {entry: run(entry, "validate", "no/such/spec.yaml") for entry in ("console script", "python -m hpsearch")}
    assert [(m.returncode, m.stderr) for m in missing.values()] == [
        (2, f"error: no/such/spec.yaml: no such file ({ROOT / 'no/such/spec.yaml'})\n")
    ] * 2


@pytest.mark.slow
def test_the_objectives_own_entry_reads_values_as_a_spec_does():
    """`python -m hpsearch.objectives.image_classification key=value ...`: weight_decay=5e-4 is a number, as in a spec."""
    args = ["dataset=digits", "model=mlp", "epochs=1", "weight_decay=5e-4", "lr=1e-2", "threads=1"]
    result = subprocess.run(
        [sys.executable, "-m", "hpsearch.objectives.image_classification", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "epoch   1 " in result.stdout and "'val_acc':" in result.stdout
