from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
from PIL import Image

from hpsearch.reading.dashboard import dashboard_url, main, redact_url, start_dashboard
from tests.conftest import cli

optuna.logging.set_verbosity(optuna.logging.WARNING)

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "tests" / "artifacts"  # gitignored: screenshots for a human to look at
CHROMIUM = Path("/usr/bin/chromium")
STUDY_NAME = "dash-demo"
N_TRIALS = 7
STARTUP_S = 30.0  # the server imports optuna and opens the storage before it answers


@dataclass(frozen=True)
class Served:
    base: str  # http://127.0.0.1:PORT
    study_id: int
    best_number: int
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _wait_until_up(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"dashboard exited with {proc.returncode}:\n{log.read_text()}")
        try:
            _get_json(url)
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"dashboard did not answer {url} within {STARTUP_S} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("dashboard")
    storage = f"sqlite:///{tmp / 'study.db'}"
    study = optuna.create_study(study_name=STUDY_NAME, storage=storage)
    study.optimize(lambda t: t.suggest_float("x", -1.0, 1.0) ** 2, n_trials=N_TRIALS)
    port = _free_port()
    log = tmp / "dashboard.log"
    with log.open("w") as out:  # a file, not a pipe: access logs must never block the server
        proc = subprocess.Popen(
            [sys.executable, "-m", "hpsearch.reading.dashboard", storage, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_up(proc, f"{base}/api/studies", log)
        summaries = _get_json(f"{base}/api/studies")["study_summaries"]
        study_id = next(s["study_id"] for s in summaries if s["study_name"] == STUDY_NAME)
        yield Served(base, study_id, study.best_trial.number, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
def test_dashboard_serves_the_study_over_http(served: Served) -> None:
    detail = _get_json(f"{served.base}/api/studies/{served.study_id}")

    assert detail["name"] == STUDY_NAME
    assert len(detail["trials"]) == N_TRIALS
    assert [t["number"] for t in detail["best_trials"]] == [served.best_number]
    assert f"open {served.base}/dashboard/" in served.log.read_text()


def _chromium(user_data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",  # containers have a small /dev/shm
            f"--user-data-dir={user_data_dir}",
            "--virtual-time-budget=10000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (.ci/install-system.sh installs it)")
def test_dashboard_study_page_renders_in_a_headless_browser(served: Served, tmp_path: Path) -> None:
    page = f"{served.base}/dashboard/studies/{served.study_id}"

    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "dashboard_study.png"
    screenshot.unlink(missing_ok=True)

    # One browser run: the DOM and the screenshot are taken once the virtual time is spent.
    run = _chromium(tmp_path / "profile", "--window-size=1400,1000", "--hide-scrollbars", "--dump-dom", f"--screenshot={screenshot}", page)

    # The served HTML is an empty React shell: the name only appears once the app has rendered.
    assert STUDY_NAME in run.stdout, run.stderr[-2000:]
    assert screenshot.exists(), run.stderr[-2000:]
    with Image.open(screenshot) as image:
        assert image.size == (1400, 1000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 24)
        assert len(colours) > 100  # a blank or loading page has a handful of colours


def test_dashboard_refuses_a_missing_sqlite_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.db"

    exit_code = main([f"sqlite:///{missing}", "--port", str(_free_port())])

    assert exit_code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(missing) in err
    assert not missing.exists()  # opened as is it would have been created empty


def test_start_dashboard_prints_url_without_password(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import optuna_dashboard

    from hpsearch.study import storage

    opened: list[str] = []
    served: list[tuple[object, str, int]] = []
    monkeypatch.setattr(storage, "open_storage", lambda url, **kw: opened.append(url) or "db")
    monkeypatch.setattr(optuna_dashboard, "run_server", lambda storage, host, port: served.append((storage, host, port)))
    url = "postgresql://hp:s3cret@db.example:5432/studies"

    port = _free_port()
    start_dashboard(url, port=port)

    out = capsys.readouterr().out
    assert "s3cret" not in out
    assert "postgresql://hp:***@db.example:5432/studies" in out
    assert f"http://127.0.0.1:{port}/dashboard/" in out
    assert opened == [url]
    assert served == [("db", "127.0.0.1", port)]  # binds to localhost unless told otherwise


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:secret@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:p@ss@h:5432/db?ssl=1", "postgresql://u:***@h:5432/db?ssl=1"),
        ("redis://:pw@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("mysql://u@h/db", "mysql://u@h/db"),
        ("sqlite:////runs/study.db", "sqlite:////runs/study.db"),
    ],
)
def test_redact_url_hides_only_the_password(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_dashboard_url() -> None:
    assert dashboard_url("127.0.0.1", 8080) == "http://127.0.0.1:8080/dashboard/"
    assert dashboard_url("::1", 9000) == "http://[::1]:9000/dashboard/"


# ---------------------------------------------------------------------------- an address it cannot listen on


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(
        f"study: dash\nobjective: {REPO / 'tests' / 'fixtures' / 'toy.py'}:objective\noutput: {tmp_path / 'runs'}\n"
        "space:\n  lr: {float: [1.0e-4, 1.0], log: true}\n"
    )
    return path


def _one_line_exit_2(result: subprocess.CompletedProcess, fragment: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    return lines[0]


def test_a_busy_port_is_one_line_that_names_a_free_port(spec: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("dashboard", str(spec), "--port", str(port), timeout=60)
        line = _one_line_exit_2(result, f"--port {port}: 127.0.0.1:{port} is already in use")
        free = int(line.rsplit("--port ", 1)[1])
        assert free != port
        with socket.socket() as probe:  # the port it names can be listened on
            probe.bind(("127.0.0.1", free))


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--port", "70000"], "--port 70000: a TCP port is 1-65535"),
        (["--port", "-1"], "--port -1: a TCP port is 1-65535"),
        (["--host", "192.0.2.1"], "--host 192.0.2.1: not an address of this machine"),  # TEST-NET-1: never local
    ],
    ids=["port_too_high", "port_negative", "foreign_address"],
)
def test_an_address_it_cannot_listen_on_is_one_line_exit_2(spec: Path, flags: list[str], fragment: str) -> None:
    _one_line_exit_2(cli("dashboard", str(spec), *flags, timeout=60), fragment)
