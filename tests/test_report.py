from __future__ import annotations

import math
import re
from pathlib import Path

import optuna
import pytest
from PIL import Image

from hpsearch.report import write_report

optuna.logging.set_verbosity(optuna.logging.WARNING)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SINGLE_PLOTS = ["history", "intermediate", "parallel_coordinate", "importances", "slice",
                "contour"]
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
        study_name=name, storage=f"sqlite:///{tmp_path / name}.db", directions=directions,
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
        f"{plot}_{metric}" for plot in ["history", "parallel_coordinate", "importances",
                                        "slice", "contour"]
        for metric in ["val_loss", "samples_per_s"]
    ]
    index = _assert_plot_files(out, stems, files)
    assert "Pareto front: " in index
    for trial in study.best_trials:
        assert re.search(rf"<tr><td>{trial.number}</td><td>{trial.values[0]:.6g}</td>", index)


def test_single_parameter_study_skips_contour_and_says_why(tmp_path: Path) -> None:
    study = _study(tmp_path, "one-param", ["minimize"], ["val_loss"])
    study.optimize(lambda t: (t.suggest_float("lr", 1e-4, 1e-1, log=True) - 0.01) ** 2,
                   n_trials=5)

    files = write_report(study, tmp_path / "report")

    out = tmp_path / "report"
    assert not (out / "contour.png").exists()
    index = _assert_plot_files(out, ["history", "slice", "importances"], files)
    assert "Contour of the top two parameters: needs at least 2 parameter(s)" in index


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
