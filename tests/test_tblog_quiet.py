"""A full disk in TensorBoard's writer thread: the trial gets the error, the slot's output gets no
thread traceback (seen in tests/test_disk_full.py, 1 run in 3)."""

from __future__ import annotations

import threading

from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread

from hpsearch.trial import tblog


def test_only_tensorboards_writer_threads_are_kept_quiet(monkeypatch, tmp_path):
    seen: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.thread.name))
    for name in ("tb", "tb2"):  # the second one finds the hook installed
        tblog.EventWriter(tmp_path / name).close()
    hook = threading.excepthook

    class Args:
        def __init__(self, thread: threading.Thread) -> None:
            self.thread = thread

    writer_thread = _AsyncWriterThread.__new__(_AsyncWriterThread)
    hook(Args(writer_thread))
    other = threading.Thread(name="other")
    hook(Args(other))
    assert seen == ["other"]
