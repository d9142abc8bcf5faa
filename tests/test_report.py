from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import optuna
import pytest
from PIL import Image

from hpsearch.plots import write_report
from hpsearch.plots.parallel import PARALLEL_PARAMS
from hpsearch.search.space import parse_space

optuna.logging.set_verbosity(optuna.logging.WARNING)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SINGLE_PLOTS = ["history", "intermediate", "parallel_coordinate", "importances", "slice", "contour"]
EPOCHS = 5


def _record(trial: optuna.Trial, reason: str, epochs: int, config: dict) -> None:
    trial.set_user_attr("reason", reason)
    trial.set_user_attr("epochs", epochs)
    trial.set_user_attr("config", config)
    trial.set_user_attr("wall_s", 1.5 * epochs)
    trial.set_user_attr("samples_per_s", 1000.0)


def _conditional_objective(trial: optuna.Trial) -> float:
    """Loss curve over 5 epochs; every 4th trial is pruned at epoch 2."""
    optimizer = trial.suggest_categorical("optimizer", ["sgd", "adam"])
    if optimizer == "sgd":
        trial.suggest_float("momentum", 0.0, 0.99)
    else:
        trial.suggest_float("beta1", 0.8, 0.999)
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    batch = trial.suggest_int("batch", 16, 256, log=True)
    config = {**trial.params, "epochs": EPOCHS}
    loss = 2.0
    for epoch in range(1, EPOCHS + 1):
        loss = 0.3 + abs(math.log10(lr) + 2.5) / 2 + batch / 1000 + 1.7 * 0.6**epoch
        trial.report(loss, step=epoch)
        if trial.number % 4 == 3 and epoch == 2:
            _record(trial, f"pruned at epoch {epoch}", epoch, config)
            raise optuna.TrialPruned()
    _record(trial, "completed", EPOCHS, config)
    trial.set_user_attr("metrics", {"val_loss": loss})
    return loss


def _study(tmp_path: Path, name: str, directions: list[str], metrics: list[str]) -> optuna.Study:
    study = optuna.create_study(
        study_name=name,
        storage=f"sqlite:///{tmp_path / name}.db",
        directions=directions,
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    study.set_user_attr("metric_names", metrics)
    return study


def _assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE, path
    with Image.open(path) as image:
        assert image.width > 100 and image.height > 100, (path, image.size)


def _assert_plot_files(out: Path, stems: list[str], files: list[Path]) -> str:
    index = (out / "index.html").read_text()
    for stem in stems:
        html_file, png_file = out / f"{stem}.html", out / f"{stem}.png"
        assert html_file in files and png_file in files, stem
        assert "Plotly.newPlot" in html_file.read_text(), html_file
        _assert_png(png_file)
        assert f"href='{html_file.name}'" in index and f"href='{png_file.name}'" in index, stem
    assert (out / "plotly.min.js").stat().st_size > 1_000_000  # the HTML plots load it offline
    return index


@pytest.mark.slow
def test_single_objective_report_has_every_plot_and_summary(tmp_path: Path) -> None:
    study = _study(tmp_path, "cifar-demo", ["minimize"], ["val_loss"])
    study.optimize(_conditional_objective, n_trials=12)
    study_from_storage = optuna.load_study(  # the report reads what others wrote
        study_name="cifar-demo", storage=f"sqlite:///{tmp_path / 'cifar-demo'}.db"
    )

    files = write_report(study_from_storage, tmp_path / "report")

    out = tmp_path / "report"
    assert all(f.exists() for f in files)
    index = _assert_plot_files(out, SINGLE_PLOTS, files)
    best = study.best_trial
    assert "cifar-demo" in index and "val_loss: minimize" in index
    assert "<td>pruned</td><td>3</td>" in index and "<td>complete</td><td>9</td>" in index
    assert f"{best.value:.6g}" in index
    assert "pruned at epoch 2" in index  # reasons in the top-trials table
    assert "Top 10 trials" in index
    # Learning curves: pruned trials have their own colour.
    curves = (out / "intermediate.html").read_text()
    assert '"name":"pruned"' in curves and '"name":"complete"' in curves


@pytest.mark.slow
def test_multi_objective_report_has_pareto_front_and_per_objective_history(
    tmp_path: Path,
) -> None:
    study = _study(tmp_path, "two-goals", ["minimize", "maximize"], ["val_loss", "samples_per_s"])

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        batch = trial.suggest_int("batch", 16, 256)
        return abs(math.log10(lr) + 2) + 64 / batch, batch * 10.0 - 100 * lr

    study.optimize(objective, n_trials=10)

    files = write_report(study, tmp_path / "report")

    out = tmp_path / "report"
    stems = ["pareto_front"] + [
        f"{plot}_{metric}"
        for plot in ["history", "parallel_coordinate", "importances", "slice", "contour"]
        for metric in ["val_loss", "samples_per_s"]
    ]
    index = _assert_plot_files(out, stems, files)
    assert "Pareto front: " in index
    for trial in study.best_trials:
        assert re.search(rf"<tr><td>{trial.number}</td><td>{trial.values[0]:.6g}</td>", index)


def test_single_parameter_study_skips_contour_and_says_why(tmp_path: Path) -> None:
    study = _study(tmp_path, "one-param", ["minimize"], ["val_loss"])
    study.optimize(lambda t: (t.suggest_float("lr", 1e-4, 1e-1, log=True) - 0.01) ** 2, n_trials=5)

    files = write_report(study, tmp_path / "report")

    out = tmp_path / "report"
    assert not (out / "contour.png").exists()
    index = _assert_plot_files(out, ["history", "slice", "importances"], files)
    assert ("Contour of the top two parameters, the learning rate always one: needs at least 2 parameter(s)") in index


@pytest.mark.parametrize("n_trials", [0, 4])
def test_no_completed_trials_gives_an_index_saying_so(tmp_path: Path, n_trials: int) -> None:
    study = _study(tmp_path, "all-pruned", ["minimize"], ["val_loss"])

    def pruned(trial: optuna.Trial) -> float:
        trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        trial.report(1.0, step=1)
        raise optuna.TrialPruned()

    study.optimize(pruned, n_trials=n_trials)

    files = write_report(study, tmp_path / "report")

    index_file = tmp_path / "report" / "index.html"
    assert files[-1] == index_file
    index = index_file.read_text()
    assert "No completed trials yet" in index
    assert "Optimization history: needs at least 1 completed trial(s), the study has 0" in index
    assert not (tmp_path / "report" / "history.html").exists()


# The shape of spaces/quickstart.yaml: each optimizer has its own lr range, stored by the engine as
# optimizer.sgd.lr and optimizer.adamw.lr, so no single lr parameter is in every trial.
TREE_SPACE = {
    "optimizer": {
        "choice": {
            "sgd": {"lr": {"float": [0.01, 0.5], "log": True}, "momentum": {"float": [0.8, 0.98]}},
            "adamw": {"lr": {"float": [3.0e-4, 1.0e-2], "log": True}, "beta2": {"float": [0.95, 0.999]}},
        }
    },
    "batch_size": {"choice": [32, 64, 128]},
    "weight_decay": {"float": [1.0e-6, 1.0e-2], "log": True},
    "schedule": {"choice": {"cosine": {"min_lr_ratio": {"float": [0.0, 0.1]}}, "linear": None}},
}


def _figure(path: Path) -> dict[str, Any]:
    """The plotly figure (data and layout) inside an HTML plot."""
    text = path.read_text()
    rest = text[text.index("Plotly.newPlot(") + len("Plotly.newPlot(") :]
    decoder, parts = json.JSONDecoder(), []
    for _ in range(3):  # the div id, the traces, the layout
        rest = rest.lstrip().lstrip(",").lstrip()
        value, end = decoder.raw_decode(rest)
        parts.append(value)
        rest = rest[end:]
    return {"data": parts[1], "layout": parts[2]}


def _tree_study(tmp_path: Path) -> tuple[optuna.Study, list[optuna.trial.FrozenTrial]]:
    """24 trials, every 6th pruned at epoch 1; accuracy peaks at lr = 0.03 whatever the
    optimizer, so lr is the parameter that matters."""
    errors: list[str] = []
    space = parse_space(TREE_SPACE, "space", errors)
    assert not errors
    study = _study(tmp_path, "tree", ["maximize"], ["val_acc"])

    def objective(trial: optuna.Trial) -> float:
        config = space.suggest(trial)
        acc = 0.95 - 0.3 * abs(math.log10(config["lr"] / 0.03)) - 0.01 * config["batch_size"] / 128
        trial.report(acc - 0.2, step=1)
        if trial.number % 6 == 5:
            raise optuna.TrialPruned()
        trial.report(acc, step=2)
        return acc

    study.optimize(objective, n_trials=24)
    return study, study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))


Tree = tuple[optuna.Study, list[optuna.trial.FrozenTrial], Path]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    """The tree study and its report, written once for the tests that read it."""
    folder = tmp_path_factory.mktemp("tree")
    study, completed = _tree_study(folder)
    write_report(study, folder / "report")
    return study, completed, folder / "report"


@pytest.mark.slow
def test_learning_rate_under_each_optimizer_is_merged_into_importances(tree: Tree) -> None:
    study, completed, out = tree
    data = json.loads((out / "importances.json").read_text())
    assert data["merged"] == {"lr": ["optimizer.adamw.lr", "optimizer.sgd.lr"]}
    groups = {g["trials"]: g for g in data["groups"]}
    assert next(iter(groups["all"]["importances"])) == "lr"  # the most important of all
    assert groups["all"]["completed"] == len(completed) == 20
    # Per option: its own lr range and parameters; the other option's are absent.
    sgd, adamw = groups["optimizer=sgd"]["importances"], groups["optimizer=adamw"]["importances"]
    assert "lr" in sgd and "optimizer.sgd.momentum" in sgd and "optimizer.adamw.beta2" not in sgd
    assert "lr" in adamw and "optimizer.adamw.beta2" in adamw
    assert sum(sgd.values()) == pytest.approx(1.0)
    index = (out / "index.html").read_text()
    assert "<b>lr</b> = optimizer.adamw.lr | optimizer.sgd.lr (log scale)" in index
    lr_row = re.search(r"<tr><td>lr</td>(.*?)</tr>", index).group(1)
    assert lr_row.count("<td>") == len(data["groups"]) and "–" not in lr_row  # in every set


def test_slice_and_contour_draw_lr_coloured_by_optimizer(tree: Tree) -> None:
    study, completed, out = tree
    fig = _figure(out / "slice.html")
    lr_axis = next(key for key, axis in fig["layout"].items() if key.startswith("xaxis") and axis["title"]["text"] == "lr")
    assert fig["layout"][lr_axis]["type"] == "log"
    lr_traces = {t["name"]: t for t in fig["data"] if t["xaxis"] == lr_axis.replace("axis", "")}
    assert set(lr_traces) == {"optimizer=sgd", "optimizer=adamw", "pruned (last reported)", "best"}
    assert all(0.01 <= x <= 0.5 for x in lr_traces["optimizer=sgd"]["x"])  # sgd's lr range
    assert all(3e-4 <= x <= 1e-2 for x in lr_traces["optimizer=adamw"]["x"])
    n_completed = len(lr_traces["optimizer=sgd"]["x"]) + len(lr_traces["optimizer=adamw"]["x"])
    assert n_completed == len(completed)
    assert len(lr_traces["pruned (last reported)"]["x"]) == 4


def test_contour_is_drawn_per_optimizer_over_its_own_lr_range(tree: Tree) -> None:
    # One surface across sgd's 0.01-0.5 and adamw's 3e-4-1e-2 would interpolate values no option ran.
    study, completed, out = tree
    assert not (out / "contour.html").exists()
    slice_colours = {t["name"]: t["marker"]["color"] for t in _figure(out / "slice.html")["data"]}
    ranges = {"sgd": (0.01, 0.5), "adamw": (3e-4, 1e-2)}
    for option, (low, high) in ranges.items():
        fig = _figure(out / f"contour_optimizer-{option}.html")
        axes = {fig["layout"][a]["title"]["text"]: a[0] for a in ("xaxis", "yaxis")}
        assert fig["layout"][f"{axes['lr']}axis"]["type"] == "log"
        assert set(axes) - {"lr"} < {
            "batch_size",
            "weight_decay",
            "optimizer.sgd.momentum",
            "optimizer.adamw.beta2",
            "schedule.cosine.min_lr_ratio",
        }
        [points] = [t for t in fig["data"] if t.get("visible", True) and t.get("mode") == "markers"]
        assert points["name"] == f"optimizer={option}"  # the legend says what the points are
        assert points["marker"]["color"] == slice_colours[f"optimizer={option}"]  # in the option's colour
        assert all(low <= lr <= high for lr in points[axes["lr"]])  # its own lr range only
        assert len(points["x"]) == sum(t.params["optimizer"] == option for t in completed)
    index = (out / "index.html").read_text()
    assert "optimizer=sgd trials only: each option has its own lr range" in index


@pytest.mark.slow
@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_slice_stars_the_best_trial_of_the_study_direction(tmp_path: Path, direction: str) -> None:
    study = _study(tmp_path, f"best-{direction}", [direction], ["val_loss"])
    study.optimize(lambda t: t.suggest_float("lr", 1e-4, 1e-1, log=True) * 10, n_trials=8)

    write_report(study, tmp_path / "report")

    data = _figure(tmp_path / "report" / "slice.html")["data"]
    best = next(t for t in data if t["name"] == "best")
    values = [t.value for t in study.trials]
    assert best["y"] == [min(values) if direction == "minimize" else max(values)]


@pytest.mark.slow
def test_parallel_coordinates_draw_the_top_parameters_and_always_lr(tmp_path: Path) -> None:
    study = _study(tmp_path, "fourteen", ["minimize"], ["val_loss"])

    def objective(trial: optuna.Trial) -> float:  # lr does not matter here: it is still drawn
        trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        return sum((i + 1) * trial.suggest_float(f"p{i:02d}", 0.0, 1.0) for i in range(13))

    study.optimize(objective, n_trials=30)

    write_report(study, tmp_path / "report")

    out = tmp_path / "report"
    axes = _figure(out / "parallel_coordinate.html")["layout"]["xaxis"]["ticktext"]
    assert len(axes) == 1 + PARALLEL_PARAMS and axes[0] == "val_loss"  # the metric, then params
    assert "lr" in axes
    index = (out / "index.html").read_text()
    hidden = sorted(set(study.trials[0].params) - set(axes))
    assert len(hidden) == 14 - PARALLEL_PARAMS
    assert f"top {PARALLEL_PARAMS} of 14 parameters by importance; not drawn: " in index
    assert all(name in index.split("not drawn: ")[1].split("<")[0] for name in hidden)


@pytest.mark.slow
def test_a_parameter_one_completed_trial_has_is_labelled_with_its_value(tmp_path: Path) -> None:
    """The quickstart's step-schedule gamma: one completed trial drew it, the worst-first list starts with a gap."""
    study = _study(tmp_path, "gamma", ["minimize"], ["val_loss"])

    def objective(trial: optuna.Trial) -> float:
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        if trial.number == 3:
            trial.suggest_categorical("schedule", ["step"])
            trial.suggest_float("gamma", 0.1, 0.9)
            return 0.0  # the best: drawn last, so the first (worst) line lacks gamma
        return 1.0 + lr

    study.optimize(objective, n_trials=8)

    write_report(study, tmp_path / "report")

    fig = _figure(tmp_path / "report" / "parallel_coordinate.html")
    gamma = study.trials[3].params["gamma"]
    assert _axis_labels(fig, "gamma") == [f"{gamma:.3g}"]
    assert "nan" not in json.dumps(fig["layout"]).lower()


def _axis_labels(fig: dict[str, Any], name: str) -> list[str]:
    """A parallel-coordinates axis's tick labels, bottom to top."""
    x = fig["layout"]["xaxis"]["ticktext"].index(name)
    ticks = [a for a in fig["layout"]["annotations"] if a["x"] == x]
    return [a["text"] for a in sorted(ticks, key=lambda a: a["y"])]


def test_parallel_coordinates_sort_choices_leave_gaps_and_keep_a_visible_colour_range(tree: Tree) -> None:
    study, completed, out = tree
    fig = _figure(out / "parallel_coordinate.html")
    names = fig["layout"]["xaxis"]["ticktext"]
    assert _axis_labels(fig, "batch_size") == ["32", "64", "128"]  # by value, not as text (128, 32, 64)
    assert _axis_labels(fig, "optimizer") == ["adamw", "sgd"]
    lines = [t for t in fig["data"] if t["mode"].startswith("lines")]
    assert len(lines) == len(completed)
    assert "None" not in json.dumps(fig)  # a missing momentum is no tick and no label
    momentum = names.index("optimizer.sgd.momentum")
    gaps = sum(line["y"][momentum] is None for line in lines)  # adamw trials have no momentum: a gap
    assert gaps == sum(t.params["optimizer"] == "adamw" for t in completed) > 0
    for line in lines:  # the worst line too: no channel near white means it shows on white paper
        red, green, blue = (int(line["line"]["color"][i : i + 2], 16) for i in (1, 3, 5))
        assert min(red, green, blue) < 200, line["line"]["color"]
    assert fig["layout"]["title"]["text"].startswith("Parallel coordinates: top ")


@pytest.mark.slow
def test_learning_curves_have_whole_epoch_ticks(tmp_path: Path) -> None:
    study = _study(tmp_path, "three-epochs", ["minimize"], ["val_loss"])

    def objective(trial: optuna.Trial) -> float:  # 3 epochs: optuna's default ticks would be 1, 1.25, 1.5, ...
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        for epoch in (1, 2, 3):
            trial.report(lr / epoch, step=epoch)
        return lr / 3

    study.optimize(objective, n_trials=3)

    write_report(study, tmp_path / "report")

    xaxis = _figure(tmp_path / "report" / "intermediate.html")["layout"]["xaxis"]
    assert (xaxis["tickmode"], xaxis["dtick"]) == ("linear", 1)


def test_the_page_says_why_dashboard_importances_differ(tree: Tree) -> None:
    study, _, out = tree
    index = (out / "index.html").read_text()
    note = index.split("<p id='dashboard-differs'>")[1].split("</p>")[0]
    assert "optuna-dashboard" in note and "optimizer.adamw.lr, optimizer.sgd.lr" in note and "no lr to rank" in note
