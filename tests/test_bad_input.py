"""Bad input through the CLI: each problem is one line on stderr, exit 2, no traceback, nothing written.

The malformed specs live in tests/bad_specs/, one file per case; the first line of each is a
comment ``# what is wrong -> expect: message fragment``. Bad flags and storage URLs are in
the table below, applied to a spec that is otherwise fine. Most cases run in this process
through ``hpsearch.cli.main`` (fast); a few run ``python -m hpsearch.cli`` like a user does.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from hpsearch.cli import main
from tests.conftest import ROOT, cli, free_port

BAD_SPECS = sorted((ROOT / "tests" / "bad_specs").glob("*.yaml"))
GOOD_SPEC = """\
# a spec that is fine, for the bad-flag cases
study: good
objective: ../fixtures/toy.py:objective
budget: {trials: 2}
fixed: {epochs: 1}
space:
  lr: {float: [1.0e-4, 1.0], log: true}
"""


def expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    match = re.fullmatch(r"# .+ -> expect: (.+)", first)
    assert match, f"{path.name}: the first line must be '# what is wrong -> expect: fragment'"
    return match.group(1)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working folder; the specs sit in tmp/bad_specs/ next to tmp/fixtures/ (their ../fixtures)."""
    shutil.copytree(ROOT / "tests" / "bad_specs", tmp_path / "bad_specs")
    shutil.copytree(ROOT / "tests" / "fixtures", tmp_path / "fixtures", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "empty_data").mkdir()
    (tmp_path / "bad_specs" / "good.yaml").write_text(GOOD_SPEC)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def written(workdir: Path) -> list[str]:
    """Anything a failed command must not have created: an output folder, a database, a pwned marker."""
    made = [p for p in workdir.rglob("*") if p.suffix == ".db" or p.name in ("runs", "pwned.txt", "s", "good")]
    return [str(p.relative_to(workdir)) for p in made]


def assert_one_line(code: int, err: str, fragment: str, workdir: Path) -> str:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert "Traceback" not in err
    assert len(lines) == 1, err
    assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    assert not written(workdir)
    return lines[0]


def test_the_corpus_has_at_least_40_cases():
    assert len(BAD_SPECS) + len(FLAG_CASES) >= 40
    assert len(BAD_SPECS) >= 40


@pytest.mark.slow
@pytest.mark.parametrize("path", BAD_SPECS, ids=[p.stem for p in BAD_SPECS])
def test_bad_spec(path: Path, workdir, capsys):
    code, _, err = run_main(["run", f"bad_specs/{path.name}"], capsys)
    line = assert_one_line(code, err, expected(path), workdir)
    assert line.startswith(f"error: bad_specs/{path.name}: "), line  # names the file


# (flags after the spec, fragment of the one error line)
FLAG_CASES = {
    "trials_negative": (["--trials", "-1"], "argument --trials: must be a positive integer, got '-1'"),
    "trials_zero": (["--trials", "0"], "argument --trials: must be a positive integer, got '0'"),
    "trials_word": (["--trials", "ten"], "argument --trials: must be a positive integer, got 'ten'"),
    "timeout_word": (["--timeout", "abc"], "argument --timeout: must be a positive number, got 'abc'"),
    "timeout_negative": (["--timeout", "-5"], "argument --timeout: must be a positive number"),
    "max_failures_zero": (["--max-failures", "0"], "argument --max-failures: must be a positive integer"),
    "workers_zero": (["--workers", "0"], "argument --workers: must be a positive integer"),
    "set_without_equals": (["--set", "budget.trials"], "expected key.path=value, got 'budget.trials'"),
    "set_without_key": (["--set", "=5"], "expected key.path=value, got '=5'"),
    "set_wrong_type": (["--set", "budget.trials=lots"], "budget.trials"),
    "set_inverted_range": (["--set", "space.lr.float=[1, 0.1]"], "low must be < high"),
    "set_into_a_scalar": (["--set", "study.name=x"], "--set study.name: study is not a mapping"),
    "unknown_flag": (["--trails", "3"], "unrecognized arguments: --trails 3"),
    "seed_negative": (["--set", "sampler.seed=-1"], "sampler.seed: Input should be greater than or equal to 0"),
    "seed_huge": (["--set", "sampler.seed=1e20"], "sampler.seed: Input should be a valid integer"),
    "set_key_path_too_deep": (["--set", ".".join(["a"] * 1000) + "=1"], "the key path is 1000 levels deep (limit 32)"),
    "workers_beyond_bound": (["--workers", "100000"], "resources.workers: 100000 trial slots on"),
    "trials_boolean": (["--set", "budget.trials=true"], "budget.trials: Input should be a valid integer, got True"),
    "backend_unknown": (["--backend", "rayy"], "argument --backend: invalid choice: 'rayy'"),
    "study_name_bad": (["--study", "a b"], "study: must be letters, digits"),
    "storage_unreachable": (
        ["--storage", "postgresql://u:secret@127.0.0.1:1/db"],
        "storage: cannot open postgresql://u:***@127.0.0.1:1/db: ",
    ),
    "storage_unknown_scheme": (["--storage", "nosuchdb://x/y"], "storage: cannot open nosuchdb://x/y"),
    "storage_not_a_url": (["--storage", "study.db"], "storage: cannot open study.db"),
    "storage_unwritable": (["--storage", "sqlite:////proc/no/study.db"], "storage: cannot open /proc/no/study.db"),
}


@pytest.mark.slow
@pytest.mark.parametrize("flags,fragment", FLAG_CASES.values(), ids=FLAG_CASES.keys())
def test_bad_flag(flags: list[str], fragment: str, workdir, capsys):
    code, out, err = run_main(["run", "bad_specs/good.yaml", *flags], capsys)
    line = assert_one_line(code, err, fragment, workdir)
    assert "secret" not in out + err, line


@pytest.mark.parametrize("case", ["outage_negative", "outage_string", "outage_boolean", "storage_a_number"])
def test_validate_refuses_a_bad_outage_limit(case: str, workdir, capsys):
    code, _, err = run_main(["validate", f"bad_specs/{case}.yaml"], capsys)
    assert_one_line(code, err, expected(ROOT / "tests" / "bad_specs" / f"{case}.yaml"), workdir)


def test_a_bad_outage_limit_in_the_environment(workdir, capsys, monkeypatch):
    monkeypatch.setenv("HPSEARCH_OUTAGE_S", "-1")
    code, _, err = run_main(["run", "bad_specs/good.yaml"], capsys)
    assert_one_line(code, err, "HPSEARCH_OUTAGE_S='-1': expected a number of seconds >= 0", workdir)


def test_spec_that_does_not_exist_or_is_a_folder(workdir, capsys):
    assert_one_line(*run_main(["run", "nope.yaml"], capsys)[::2], "nope.yaml: no such file", workdir)
    assert_one_line(*run_main(["validate", "bad_specs"], capsys)[::2], "bad_specs: no such file", workdir)


def test_a_zero_byte_file(workdir, capsys):
    (workdir / "zero.yaml").write_text("")
    assert_one_line(*run_main(["run", "zero.yaml"], capsys)[::2], "zero.yaml: the file is empty", workdir)


def test_a_bad_heartbeat_setting(workdir, capsys, monkeypatch):
    monkeypatch.setenv("HPSEARCH_HEARTBEAT_S", "often")
    code, _, err = run_main(["run", "bad_specs/good.yaml"], capsys)
    assert_one_line(code, err, "HPSEARCH_HEARTBEAT_S='often': expected a number of seconds > 0", workdir)


def test_several_problems_are_all_reported_one_line_each(workdir, capsys):
    (workdir / "bad_specs" / "several.yaml").write_text(
        "study: s\n"
        "objective: ../fixtures/toy.py:objective\n"
        "budgett: {trials: 3}\n"
        "sampler: tpee\n"
        "pruner: {name: median, warmup_epochs: -1}\n"
        "space:\n"
        "  lr: {float: [1.0, 0.1]}\n"
        "  m: {int: [0, 4], log: true}\n"
    )
    code, _, err = run_main(["run", "bad_specs/several.yaml"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err
    assert len(lines) == 5, err
    assert all(line.startswith("error: bad_specs/several.yaml: ") for line in lines)
    for fragment in (
        "budgett: unknown key; did you mean 'budget'?",
        "sampler.name",
        "pruner.warmup_epochs",
        "space.lr.float: low must be < high",
        "space.m.int: a log scale needs low > 0",
    ):
        assert sum(fragment in line for line in lines) == 1, (fragment, lines)
    assert not written(workdir)


@pytest.mark.slow
def test_the_python_tag_never_runs(workdir):
    """As a user runs it: the tag's command would create pwned.txt."""
    result = cli("run", "bad_specs/python_object_tag.yaml", cwd=workdir)
    assert_one_line(result.returncode, result.stderr, "is not allowed: a spec holds plain data", workdir)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["yaml_unclosed_bracket", "builtin_dataset_files_missing"])
def test_bad_spec_from_a_real_process(case: str, workdir):
    path = ROOT / "tests" / "bad_specs" / f"{case}.yaml"
    result = cli("run", f"bad_specs/{case}.yaml", cwd=workdir)
    assert_one_line(result.returncode, result.stderr, expected(path), workdir)
    assert result.stdout == ""


def test_missing_dataset_says_where_it_looked_and_how_to_get_it(workdir, capsys):
    code, _, err = run_main(["validate", "bad_specs/builtin_dataset_files_missing.yaml"], capsys)
    line = assert_one_line(code, err, "no data under", workdir)
    assert str(workdir / "empty_data" / "cifar-10-batches-py") in line  # the absolute path it looked in
    assert "download: true" in line  # how to get it


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags,fragment",
    [
        (["--trials", "-1"], "must be a positive integer, got '-1'"),
        (["--set", "budget.trials"], "expected key.path=value"),
        (["--timeout", "abc"], "must be a positive number, got 'abc'"),
        (["--storage", "postgresql://u:secret@127.0.0.1:1/db"], "postgresql://u:***@127.0.0.1:1/db"),
    ],
    ids=["trials", "set", "timeout", "storage"],
)
def test_bad_flag_from_a_real_process(flags: list[str], fragment: str, workdir):
    result = cli("run", "bad_specs/good.yaml", *flags, cwd=workdir)
    assert_one_line(result.returncode, result.stderr, fragment, workdir)
    assert "secret" not in result.stdout + result.stderr


@pytest.mark.slow
def test_the_dashboard_binds_to_this_machine_unless_told(workdir, monkeypatch, capsys):
    import optuna_dashboard

    served = []
    monkeypatch.setattr(optuna_dashboard, "run_server", lambda url, host, port: served.append(host))
    (workdir / "runs" / "good").mkdir(parents=True)
    (workdir / "runs" / "good" / "study.db").touch()
    port = str(free_port())  # the dashboard binds host:port once to check it before serving
    assert main(["dashboard", "bad_specs/good.yaml", "--output", "runs", "--port", port]) == 0
    assert main(["dashboard", "bad_specs/good.yaml", "--output", "runs", "--host", "0.0.0.0", "--port", port]) == 0
    assert served == ["127.0.0.1", "0.0.0.0"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["yaml_alias_bomb", "yaml_nested_too_deep", "yaml_alias_cycle"])
def test_hostile_yaml_is_one_line_from_a_real_process_and_never_hangs(case: str, workdir):
    """Before the limits, the alias bomb ran for minutes and 5,000 brackets ended in a RecursionError traceback."""
    result = cli("validate", f"bad_specs/{case}.yaml", cwd=workdir, timeout=30)
    assert_one_line(result.returncode, result.stderr, expected(ROOT / "tests" / "bad_specs" / f"{case}.yaml"), workdir)


@pytest.mark.slow
def test_a_very_large_spec_is_refused_before_it_is_parsed(workdir):
    big = workdir / "big.yaml"
    big.write_text(GOOD_SPEC.replace("../fixtures", "fixtures") + "description: |\n" + "  a line of text\n" * 20_000)  # 332 KiB
    result = cli("run", "big.yaml", cwd=workdir, timeout=30)
    line = assert_one_line(result.returncode, result.stderr, "big.yaml: the file is 332 KiB", workdir)
    assert "limit 64 KiB" in line


@pytest.mark.slow
def test_an_empty_space_says_there_is_nothing_to_search_and_writes_nothing(workdir):
    result = cli("run", "bad_specs/space_empty.yaml", cwd=workdir)
    line = assert_one_line(result.returncode, result.stderr, "nothing to search", workdir)
    assert "hpsearch train" in line
    assert result.stdout == ""


@pytest.mark.parametrize("dataset,attribute", [("cifar10", "url"), ("mnist", "mirrors")])
def test_a_download_that_fails_is_one_line_before_the_study_starts(dataset: str, attribute: str, workdir, capsys, monkeypatch):
    """No network (here: a closed port instead of the dataset's host): one line naming the dataset,
    where the files go and how to turn the download off; no trial runs, no data/ folder is left."""
    from torchvision import datasets

    unreachable = f"http://127.0.0.1:{free_port()}/"
    tv = datasets.CIFAR10 if dataset == "cifar10" else datasets.MNIST
    monkeypatch.setattr(tv, attribute, unreachable + "cifar-10-python.tar.gz" if attribute == "url" else [unreachable])
    (workdir / "offline.yaml").write_text(
        f"study: offline\nfixed: {{dataset: {dataset}, data_root: data, download: true, model: resnet8, epochs: 1}}\n"
        "space:\n  lr: {float: [1.0e-4, 1.0], log: true}\n"
    )
    code, _, err = run_main(["run", "offline.yaml"], capsys)
    line = assert_one_line(code, err, f"{dataset}: fixed.download is true but the download failed (", workdir)
    assert str(workdir / "data") in line  # where the files go
    assert "set fixed.download: false" in line
    assert not (workdir / "data").exists()  # the failed download left nothing behind


@pytest.mark.slow
def test_hostile_yaml_in_a_set_value_or_an_exported_config_is_one_line(workdir):
    """--set values and `hpsearch train FILE` go through the spec's limits too (they used plain yaml.load)."""
    levels = ["&a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"&{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    bomb = "[" + ", ".join(levels) + "]"  # 9 levels of 9: 9^9 values once expanded
    result = cli("validate", "bad_specs/good.yaml", "--set", f"fixed.x={bomb}", cwd=workdir, timeout=30)
    assert_one_line(
        result.returncode, result.stderr, "--set fixed.x: line 1: YAML aliases (*name) expand this to more than 100,000", workdir
    )

    exported = workdir / "best.yaml"
    exported.write_text("objective: toy.py:objective\nmetric: val_acc\nconfig:\n  x: " + bomb + "\n")
    result = cli("train", "best.yaml", cwd=workdir, timeout=30)
    assert_one_line(result.returncode, result.stderr, "best.yaml: line 4: YAML aliases (*name) expand this to more than 100,000", workdir)
    exported.unlink()


def test_the_resume_hint_after_an_interrupt_hides_the_storage_password(workdir, capsys, monkeypatch):
    import hpsearch.engine.optuna as engine

    def interrupted(spec, quiet=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "run", interrupted)
    code, out, err = run_main(["run", "bad_specs/good.yaml", "--storage", "postgresql://u:SECRET@127.0.0.1:1/db"], capsys)
    assert code == 130
    assert "to resume, run the same command again: hpsearch run bad_specs/good.yaml --storage postgresql://u:***@127.0.0.1:1/db" in err
    assert "SECRET" not in out + err
