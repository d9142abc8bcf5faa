"""`hpsearch lr-find`: a range test per optimizer option, suggested bounds, plots, and a narrowed spec."""

from __future__ import annotations

import re

import pytest

from hpsearch.cli import main
from hpsearch.spec.loader import load_spec
from tests.conftest import cli

SPEC = """\
    study: lrf
    output: runs
    fixed: {{dataset: digits, model: mlp, mlp_hidden: [32], epochs: 1, threads: 1, seed: 0}}
    space:
      optimizer:
        choice:
          sgd:
            lr: {{float: [0.01, 0.5], log: true}}    # per optimizer step
            momentum: {{float: [0.5, 0.99]}}
          adamw:
            lr: {{float: [1.0e-4, 1.0e-2], log: true}}
      batch_size: {{choice: [32, 64]}}
"""


def suggested(stdout: str) -> dict[str, tuple[float, float]]:
    """The table's suggested [low, high] per option."""
    rows = re.findall(r"^(sgd|adamw|adam)\s.*?\[([\d.e+-]+), ([\d.e+-]+)\]\s+\[", stdout, re.M)
    return {name: (float(low), float(high)) for name, low, high in rows}


@pytest.mark.slow
def test_lr_find_suggests_plots_and_writes_a_narrowed_spec(write_spec, tmp_path):
    spec = write_spec(SPEC)
    before = spec.read_bytes()
    out = tmp_path / "narrowed" / "spec-lr.yaml"  # another folder: the spec's relative output: must still point to runs/

    done = cli("lr-find", str(spec), "--steps", "40", "--apply", str(out), "--out", str(tmp_path / "plots"))

    assert done.returncode == 0, done.stderr
    found = suggested(done.stdout)
    assert set(found) == {"sgd", "adamw"}, done.stdout
    for low, high in found.values():
        assert high / low == pytest.approx(30, rel=0.01)  # low = high / 30
    for name in ("sgd", "adamw"):
        png = tmp_path / "plots" / f"lr-find-{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert spec.read_bytes() == before  # the user's file is untouched

    assert cli("validate", str(out), "--samples", "3").returncode == 0
    narrowed, original = load_spec(out), load_spec(spec)
    params = dict(narrowed.tree.parameters())
    for name, (low, high) in found.items():
        lr = params[f"optimizer.{name}.lr"]
        assert (lr.low, lr.high, lr.log) == (pytest.approx(low, rel=2e-3), pytest.approx(high, rel=2e-3), True)
    lines = out.read_text().splitlines()
    lr_lines = [i for i, line in enumerate(lines) if line.strip().startswith("lr:")]
    assert len(lr_lines) == 2 and all(
        lines[i - 1].strip().startswith("# lr-find: high = 3 x lr at the min smoothed loss") for i in lr_lines
    )
    assert narrowed.study == "lrf-lrfind" and narrowed.study_dir.parent == original.study_dir.parent


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("objective: {toy}:objective\nspace: {{lr: {{float: [0.01, 0.1], log: true}}}}\n", [], "lr-find drives the built-in objective"),
        ("fixed: {{dataset: digits, model: mlp, lr: 0.1}}\nspace: {{batch_size: {{choice: [32, 64]}}}}\n", [], "no lr range to narrow"),
        (
            "fixed: {{dataset: digits, model: mlp}}\nspace: {{lr: {{float: [0.01, 0.1], log: true}}}}\n",
            ["--apply", "SELF"],
            "never overwrites",
        ),
        (
            "fixed: {{dataset: digits, model: mlp}}\nspace: {{weight_decay: {{float: [0.0, 0.01]}}}}\n",
            ["--set", "space.lr={float: [0.01, 0.1], log: true}", "--apply", "OUT"],
            "space.lr: not found in the file's text",
        ),
    ],
    ids=["other-objective", "no-lr-range", "apply-onto-input", "apply-a-range-only-set-on-the-command-line"],
)
def test_lr_find_refuses_in_one_line(write_spec, tmp_path, capsys, text, extra, message):
    spec = write_spec("study: x\noutput: runs\n" + text)
    before = spec.read_bytes()

    paths = {"SELF": str(spec), "OUT": str(tmp_path / "out.yaml")}
    code = main(["lr-find", str(spec), *[paths.get(a, a) for a in extra]])

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0] and str(spec) in err[0], err
    assert spec.read_bytes() == before and not (tmp_path / "runs").exists() and not (tmp_path / "out.yaml").exists()  # nothing written


def test_lr_find_apply_rewrites_a_block_style_lr_shared_by_two_optimizers(write_spec, tmp_path, capsys):
    spec = write_spec(
        """\
        fixed: {{dataset: digits, model: mlp, mlp_hidden: [16], epochs: 1, threads: 1}}
        space:
          optimizer: {{choice: [sgd, adam]}}
          lr:                 # one range for both optimizers
            float: [0.001, 0.1]
            log: true
          weight_decay: {{float: [0.0, 0.01]}}
        """
    )
    out = tmp_path / "narrow.yaml"

    assert main(["lr-find", str(spec), "--steps", "15", "--apply", str(out), "--out", str(tmp_path / "plots")]) == 0

    found = suggested(capsys.readouterr().out)
    lr = load_spec(out).tree.params["lr"]
    low, high = min(v[0] for v in found.values()), max(v[1] for v in found.values())  # the union of both options
    assert set(found) == {"sgd", "adam"} and (lr.low, lr.high) == (pytest.approx(low, rel=2e-3), pytest.approx(high, rel=2e-3))
    assert "weight_decay: {float: [0.0, 0.01]}" in out.read_text()  # the next key survives the block's replacement
