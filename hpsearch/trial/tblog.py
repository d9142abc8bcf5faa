"""TensorBoard event files with tensorboard's own writer and protos.

torch.utils.tensorboard would do the same but imports torch (about 4 s), which a trial of
a torch-free objective, and every CLI start, should not pay.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def _quiet_writer_threads() -> None:
    """TensorBoard's writer thread hands its error (a full disk) to the caller's next write, flush or
    close, where the trial records it; Python would also print it from the thread, a traceback in a
    slot's output. Keep the caller's copy only; every other thread's error prints as before."""
    import threading

    from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread

    previous = threading.excepthook
    if getattr(previous, "hpsearch_quiet", False):
        return

    def hook(args: Any) -> None:
        if not isinstance(args.thread, _AsyncWriterThread):
            previous(args)

    hook.hpsearch_quiet = True  # type: ignore[attr-defined]
    threading.excepthook = hook


class EventWriter:
    """Scalars and one HParams session, written to ``log_dir``."""

    def __init__(self, log_dir: Path):
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        _quiet_writer_threads()
        log_dir.mkdir(parents=True, exist_ok=True)
        self._file = EventFileWriter(str(log_dir))

    def _write(self, summary: Any, step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        self._file.add_event(Event(wall_time=time.time(), step=step, summary=summary))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._write(Summary(value=[Summary.Value(tag=tag, simple_value=float(value))]), step)

    def add_hparams(self, hparams: dict[str, Any], metrics: dict[str, float], step: int) -> None:
        """The three summaries TensorBoard's HParams view reads, then the metric scalars."""
        from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
        from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

        start = plugin_data_pb2.SessionStartInfo()
        infos = []
        for name, value in hparams.items():
            if isinstance(value, bool):
                start.hparams[name].bool_value, kind = value, "DATA_TYPE_BOOL"
            elif isinstance(value, (int, float)):
                start.hparams[name].number_value, kind = float(value), "DATA_TYPE_FLOAT64"
            else:
                start.hparams[name].string_value, kind = str(value), "DATA_TYPE_STRING"
            infos.append(api_pb2.HParamInfo(name=name, type=api_pb2.DataType.Value(kind)))
        experiment = api_pb2.Experiment(
            hparam_infos=infos, metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=t)) for t in metrics]
        )
        end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))
        for tag, data in (
            (metadata.EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(experiment=experiment)),
            (metadata.SESSION_START_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_start_info=start)),
            (metadata.SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_end_info=end)),
        ):
            data.version = metadata.PLUGIN_DATA_VERSION
            meta = SummaryMetadata(
                plugin_data=SummaryMetadata.PluginData(plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString())
            )
            self._write(Summary(value=[Summary.Value(tag=tag, metadata=meta)]), step)
        for tag, value in metrics.items():
            self.add_scalar(tag, value, step)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
