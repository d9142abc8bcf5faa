"""`hpsearch lr-find SPEC`: Smith's learning-rate range test per optimizer option, before the search.

For each optimizer option of the space (one test when the optimizer is fixed), the other
parameters sit at their middle (log-middle of a log range, middle of a linear range, the
median of numeric choices, the first of other choices, a constant as it is). The lr then
rises exponentially from the option's low bound / 10 to its high bound x 10 over `steps`
optimizer steps (default: one epoch of the training split; a short epoch is repeated up to
MIN_STEPS steps, never past one trial's steps), with the
built-in objective's data, model, optimizer and autocast. The loss is smoothed
exponentially; the test stops when the smoothed loss exceeds DIVERGED x its minimum.

Suggestion: high = 3 x the lr at the smoothed loss's minimum (never above the largest lr
tested, half of it when the test diverged there), low = high / 30. Why not fastai's
"minimum / 10" (a one-cycle peak for a fixed recipe): a search draws a peak lr that a
decaying schedule (cosine, linear) and warmup soon lower, and on Fashion-MNIST
(BENCHMARKS.md) the best trials of every search used 0.4-1.7x the min-loss lr, which
minimum / 10 would have excluded. At 3x the minimum the loss has barely started to rise;
below minimum / 10 it falls too slowly to finish in a trial's epochs. The 30x range keeps
the search room of a typical hand-set range (1.5 decades).

Cost: per option at most `steps` training steps and no validation pass: by default one epoch
(a trial of E epochs costs E epochs and E validation passes), on a tiny dataset at most 100
steps and never more than one trial's training steps.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpsearch.base.errors import UserError
from hpsearch.base.text import fmt
from hpsearch.search.space import Choice, Const, Float, Int, Param
from hpsearch.trial.objective import BUILTIN

if TYPE_CHECKING:
    from hpsearch.spec.loader import Spec

MIN_STEPS = 100  # a tiny dataset's epoch (digits: ~20 steps) is too few points for a curve: repeated up to this, or a trial's steps
DIVERGED = 4.0  # stop when the smoothed loss exceeds this many times its minimum
SPAN = 10.0  # the test runs from the option's low / SPAN to its high x SPAN
ABOVE_MIN = 3.0  # suggested high = lr at the minimum smoothed loss x this ...
BELOW_DIVERGED = 2.0  # ... and at most the lr where the test diverged / this
RANGE = 30.0  # suggested low = high / this


@dataclass(frozen=True)
class Target:
    """One range test: an optimizer option, where its lr range lives in the space, the middle config."""

    option: str
    lr_path: str  # backend name of the lr parameter: "optimizer.sgd.lr", or "lr" at the top level
    current: Float
    config: dict[str, Any]


@dataclass
class Curve:
    target: Target
    start: float  # lr of the first step
    end: float  # lr the last planned step would have reached
    planned: int  # optimizer steps planned
    lrs: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)  # mean training loss of each step's batch
    smoothed: list[float] = field(default_factory=list)  # exponentially smoothed, bias-corrected
    diverged: bool = False
    samples: int = 0  # training images seen
    train_size: int = 0  # images in one epoch of the training split
    png: Path | None = None

    @property
    def lr_at_min(self) -> float:
        return self.lrs[min(range(len(self.smoothed)), key=self.smoothed.__getitem__)]

    @property
    def suggested(self) -> tuple[float, float]:
        # never above the largest lr tested (half of it when the test diverged there)
        high = min(self.lr_at_min * ABOVE_MIN, self.lrs[-1] / (BELOW_DIVERGED if self.diverged else 1.0))
        return high / RANGE, high

    @property
    def epochs(self) -> float:
        """Cost in epochs of the training split (what a trial's epoch costs, without its validation pass)."""
        return self.samples / max(1, self.train_size)

    @property
    def stop(self) -> str:
        if self.diverged:
            return f"diverged at lr {fmt(self.lrs[-1])}"
        return "no divergence: the min may lie higher" if self.lr_at_min >= self.lrs[int(0.95 * (len(self.lrs) - 1))] else "end"


# ---------------------------------------------------------------------------- what to test


def targets(spec: Spec) -> list[Target]:
    """One Target per optimizer option with an lr range; UserError when lr-find cannot run on this spec."""
    if spec.objective != BUILTIN:
        raise UserError(
            f"{spec.path}: objective: lr-find drives the built-in objective ({BUILTIN}) step by step; "
            f"{spec.objective} is a black box to it (set the lr range by hand, or search a wide log range)"
        )
    from hpsearch.parts.settings import setting

    top = spec.tree.params.get("optimizer")
    if isinstance(top, Choice):
        options = [str(o) for o in top.options]
    else:
        options = [str(top.value if isinstance(top, Const) else setting(spec.fixed, "optimizer"))]
    found = [t for o in options if (t := _target(spec, o, isinstance(top, Choice))) is not None]
    if not found:
        raise UserError(
            f"{spec.path}: space: no lr range to narrow; lr-find suggests the bounds of an lr "
            "{float: [low, high], log: true} under space: (or under each optimizer option)"
        )
    return found


def _target(spec: Spec, option: str, chosen: bool) -> Target | None:
    params = dict(spec.tree.parameters())
    path = f"optimizer.{option}.lr" if chosen and f"optimizer.{option}.lr" in params else "lr"
    lr = params.get(path)
    if lr is None or isinstance(lr, Const):
        return None
    if not isinstance(lr, Float):
        raise UserError(f"{spec.path}: space.{_yaml_path(path)}: lr-find narrows a float range, got {type(lr).__name__.lower()}")
    pick_option = {"optimizer": option} if chosen else {}
    sampled = spec.tree.walk(lambda p, param: pick_option.get(p, middle(param)))
    return Target(option, path, lr, spec.config_for(sampled))


def middle(param: Param) -> Any:
    """The value a range test holds a parameter at: see the module docstring."""
    if isinstance(param, (Float, Int)):
        value = math.sqrt(param.low * param.high) if param.log else (param.low + param.high) / 2
        if param.step:
            value = param.low + round((value - param.low) / param.step) * param.step
        return round(value) if isinstance(param, Int) else value
    if isinstance(param, Choice):
        numbers = [o for o in param.options if isinstance(o, (int, float)) and not isinstance(o, bool)]
        return sorted(numbers)[(len(numbers) - 1) // 2] if len(numbers) == len(param.options) else param.options[0]
    if isinstance(param, Const):
        return param.value
    raise TypeError(f"no middle for {param!r}")


def _yaml_path(path: str) -> str:
    """Backend name -> key path in the spec: optimizer.sgd.lr -> optimizer.choice.sgd.lr."""
    parts = path.split(".")
    return ".".join(p if i % 2 == 0 else f"choice.{p}" for i, p in enumerate(parts))


# ---------------------------------------------------------------------------- the range test


def range_test(target: Target, steps: int | None = None) -> Curve:
    """Train from the target's middle config while the lr rises exponentially; see the module docstring."""
    import torch

    from hpsearch.parts import DEFAULTS, build_data, build_model, build_optimizer
    from hpsearch.parts.loop import amp_dtype, grad_scaler, prepare_process
    from hpsearch.parts.models import is_convnet

    cfg = {**DEFAULTS, **target.config}
    device = prepare_process(cfg)  # device, threads, float mode and seeds as the built-in objective sets them
    data = build_data(cfg, device)
    model = build_model(cfg["model"], data.num_classes, data.image_shape, cfg).to(device)
    if cfg["channels_last"] is True or (cfg["channels_last"] == "auto" and is_convnet(model)):
        model = model.to(memory_format=torch.channels_last)  # as the objective lays out a convnet
        data.transform.channels_last = True
    accum = int(cfg["accum_steps"])
    per_epoch = len(data.train) // accum
    planned = steps or max(per_epoch, min(MIN_STEPS, per_epoch * int(cfg["epochs"])))  # never more than one trial's steps
    start, end = target.current.low / SPAN, target.current.high * SPAN
    curve = Curve(target, start, end, planned, train_size=len(data.train) * int(cfg["batch_size"]))
    optimizer = build_optimizer(model, {**cfg, "lr": start}, device)
    dtype = amp_dtype(cfg["amp"], device)
    scaler = grad_scaler(device, dtype)
    beta = min(0.98, max(0.5, 1 - 20 / planned))  # smoothing over ~5 % of the test (a longer memory lags the lr)
    average, batches = 0.0, _batches(data.train, accum)
    model.train()
    for step in range(planned):
        lr = start * (end / start) ** (step / max(1, planned - 1))
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = _step(model, optimizer, scaler, next(batches), cfg, dtype)
        curve.samples += int(cfg["batch_size"]) * accum
        if not math.isfinite(loss):
            curve.diverged = bool(curve.lrs)
            break
        average = beta * average + (1 - beta) * loss
        curve.lrs.append(lr)
        curve.losses.append(loss)
        curve.smoothed.append(average / (1 - beta ** (step + 1)))
        if step > planned // 20 and curve.smoothed[-1] > DIVERGED * min(curve.smoothed):
            curve.diverged = True
            break
    if not curve.lrs:
        raise UserError(f"{target.option}: the loss was not finite at the first step (lr {fmt(start)}); check the spec's fixed: values")
    return curve


def _batches(loader: Any, accum: int) -> Iterator[list[tuple[Any, Any]]]:
    """Groups of `accum` micro-batches (one optimizer step each), epoch after epoch."""
    while True:
        group: list[tuple[Any, Any]] = []
        for batch in loader:
            group.append(batch)
            if len(group) == accum:
                yield group
                group = []


def _step(model: Any, optimizer: Any, scaler: Any, group: list[tuple[Any, Any]], cfg: dict[str, Any], dtype: Any) -> float:
    """One optimizer step as the training loop takes it; the mean loss of its micro-batches (one host sync)."""
    import torch
    import torch.nn.functional as F

    from hpsearch.parts.loop import autocast, optimizer_step

    device = next(model.parameters()).device
    total = torch.zeros((), device=device)
    for x, y in group:
        with autocast(device, dtype):
            loss = F.cross_entropy(model(x), y, label_smoothing=float(cfg["label_smoothing"]))
        scaled = loss / len(group)
        (scaler.scale(scaled) if scaler else scaled).backward()
        total += loss.detach().float() / len(group)
    optimizer_step(model, optimizer, scaler, float(cfg["grad_clip"]))
    return float(total.item())


# ---------------------------------------------------------------------------- plot and table


def plot(curve: Curve, path: Path) -> Path:
    """Loss against lr (log x): raw and smoothed, the current range shaded, the suggested bounds marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    low, high = curve.suggested
    current = curve.target.current
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(curve.lrs, curve.losses, color="0.75", linewidth=0.8, label="training loss per step")
    ax.plot(curve.lrs, curve.smoothed, color="C0", linewidth=2, label="smoothed")
    ax.axvspan(current.low, current.high, color="0.5", alpha=0.12, label=f"current range [{fmt(current.low)}, {fmt(current.high)}]")
    ax.axvspan(low, high, color="C2", alpha=0.25, label=f"suggested [{fmt(low)}, {fmt(high)}]")
    for x in (low, high):
        ax.axvline(x, color="C2", linewidth=1.2)
    ax.axvline(curve.lr_at_min, color="C3", linestyle=":", label=f"min smoothed loss at lr {fmt(curve.lr_at_min)}")
    finite = [v for v in curve.smoothed if math.isfinite(v)]
    lowest = finite.index(min(finite))
    ax.set_ylim(min(finite) * 0.9, max(finite[: lowest + 1]) * 1.1)  # from the start to the minimum; the divergence leaves the top
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel("training loss")
    ax.set_title(f"lr range test: {curve.target.option}, {len(curve.lrs)} steps ({curve.stop})")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def table(curves: list[Curve]) -> list[str]:
    header = ["option", "lr tested", "steps (epochs)", "stop", "min loss at lr", "suggested [low, high]", "current range"]
    rows = [
        [
            c.target.option,
            f"{fmt(c.lrs[0])} .. {fmt(c.lrs[-1])}",
            f"{len(c.lrs)}/{c.planned} ({c.epochs:.2f})",
            c.stop,
            fmt(c.lr_at_min),
            "[{}, {}]".format(*map(fmt, c.suggested)),
            f"[{fmt(c.target.current.low)}, {fmt(c.target.current.high)}]",
        ]
        for c in curves
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]


def run(spec: Spec, steps: int | None = None, out: Path | None = None) -> list[Curve]:
    """Range-test every option; draw one PNG per option into `out` (default: the study's folder /lr-find)."""
    folder = out or spec.study_dir / "lr-find"
    curves = []
    for target in targets(spec):
        curve = range_test(target, steps)
        curve.png = plot(curve, folder / f"lr-find-{re.sub(r'[^A-Za-z0-9_.-]', '_', target.option)}.png")
        curves.append(curve)
    return curves


# ---------------------------------------------------------------------------- --apply


def check_apply(spec: Spec, out: Path, tested: list[Target] | None = None) -> None:
    """Before any work: --apply never writes over the spec it reads, and finds each `tested` lr range in its text."""
    if out.resolve() == Path(spec.path).resolve():
        raise UserError(f"{out}: --apply writes a new spec; it never overwrites the spec it reads ({spec.path}): name another file")
    root = yaml.compose(Path(spec.path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    for target in tested or []:
        _find(root, ["space", *_yaml_path(target.lr_path).split(".")], spec.path)


def suggestions(curves: list[Curve]) -> dict[str, tuple[float, float]]:
    """Suggested range per lr parameter; a top-level lr shared by several options gets their union."""
    out: dict[str, tuple[float, float]] = {}
    for c in curves:
        low, high = (float(_num(v)) for v in c.suggested)  # as written to the spec
        old = out.get(c.target.lr_path)
        out[c.target.lr_path] = (low, high) if old is None else (min(old[0], low), max(old[1], high))
    return out


def apply(spec: Spec, curves: list[Curve], out: Path) -> str:
    """The spec's text with each tested lr range replaced by its suggestion, a comment above it saying
    where it came from; a study named in the spec gets a new name (the narrowed search is a new study);
    `output:` and a relative sqlite storage are rewritten for OUT's folder (they are relative to the spec's)."""
    check_apply(spec, out)
    text = Path(spec.path).read_text(encoding="utf-8")
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        raise UserError(f"{spec.path}: the top level must be a mapping")
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in character offsets of the text
    for lr_path, (low, high) in suggestions(curves).items():
        group = [c for c in curves if c.target.lr_path == lr_path]
        key, value = _find(root, ["space", *_yaml_path(lr_path).split(".")], spec.path)
        old = group[0].target.current
        why = "; ".join(f"{c.target.option}: min smoothed loss at lr {fmt(c.lr_at_min)}, {len(c.lrs)} steps, {c.stop}" for c in group)
        note = (
            f"# lr-find: high = {ABOVE_MIN:g} x lr at the min smoothed loss (at most the top lr tested, /{BELOW_DIVERGED:g} if it diverged), "
            f"low = high / {RANGE:g} "
            f"({why}); was [{_num(old.low)}, {_num(old.high)}]"
        )
        edits.append((value.start_mark.index, _content_end(value), f"{{float: [{_num(low)}, {_num(high)}], log: true}}"))
        edits.append(_comment_above(text, key, note))
    edits += _moved(spec, root, text, out)
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def write(spec: Spec, curves: list[Curve], out: Path) -> Path:
    """apply(), then keep the file only if it loads from its new place (objective checks included)
    with the suggested ranges."""
    from hpsearch.spec.loader import load_spec

    text = apply(spec, curves, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.partial")
    tmp.write_text(text, encoding="utf-8")
    try:
        try:
            study = (yaml.safe_load(text) or {}).get("study") or out.stem
        except yaml.YAMLError as exc:
            raise UserError(f"{out}: the rewritten spec is not valid YAML ({str(exc).splitlines()[0]}); nothing written") from None
        params = dict(load_spec(tmp, [f"study={study}"]).tree.parameters())
        for lr_path, (low, high) in suggestions(curves).items():
            got = params.get(lr_path)
            if not (isinstance(got, Float) and math.isclose(got.low, low) and math.isclose(got.high, high)):
                raise UserError(f"{out}: the rewritten spec does not hold the suggested space.{_yaml_path(lr_path)}; nothing written")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(out)
    return out


def _num(value: float) -> str:
    """3 significant digits, as YAML reads it back as a float (1.0e-04, not 1e-04)."""
    text = f"{value:.3g}"
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _find(root: yaml.Node | None, keys: list[str], where: str) -> tuple[yaml.Node, yaml.Node]:
    """(key node, value node) at a key path of the composed YAML."""
    node: yaml.Node | None = root
    pair: tuple[yaml.Node, yaml.Node] | None = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            break
        pair = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
        if pair is None:
            break
        node = pair[1]
    else:
        if pair is not None:
            return pair
    raise UserError(f"{where}: {'.'.join(keys)}: not found in the file's text (set by --set?); --apply rewrites ranges written in the file")


def _content_end(node: yaml.Node) -> int:
    """Where a value's text ends: a block collection's end mark lies at the next key, past its newline."""
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        return _content_end(last[1] if isinstance(last, tuple) else last)
    return int(node.end_mark.index)


def _comment_above(text: str, key: yaml.Node, note: str) -> tuple[int, int, str]:
    """A whole-line comment above the key's line, at its indentation: valid in block and flow style alike."""
    line_start = text.rfind("\n", 0, key.start_mark.index) + 1
    indent = re.match(r"[ \t]*", text[line_start:]).group(0)  # type: ignore[union-attr]  # always matches
    return line_start, line_start, f"{indent}{note}\n"


def _moved(spec: Spec, root: yaml.MappingNode, text: str, out: Path) -> list[tuple[int, int, str]]:
    """The study's new name; `output:` (and a relative sqlite storage) rewritten for OUT's folder. A value's
    own end-of-line comment is replaced along with it (it described the old value)."""
    edits: list[tuple[int, int, str]] = []
    top = {k.value: v for k, v in root.value if isinstance(k, yaml.ScalarNode)}
    if "study" in top:
        name = str(top["study"].value)
        edits.append(_replace_line_value(text, top["study"], f"{name}-lrfind  # lr-find: a new study; {name} keeps its trials"))
    old_dir, new_dir = spec.base_dir, Path(os.path.abspath(out)).parent
    if old_dir == new_dir:
        return edits
    output = _path_from(new_dir, old_dir / spec.output)
    note = f"# lr-find: the folder {spec.path} writes to ({spec.output} from its folder)"
    if "output" not in top:
        newline = "" if text.endswith("\n") else "\n"
        edits.append((len(text), len(text), f"{newline}output: {output}  {note}\n"))
    elif not os.path.isabs(str(top["output"].value)):
        edits.append(_replace_line_value(text, top["output"], f"{output}  {note}"))
    node = top.get("storage")
    inline = isinstance(node, yaml.MappingNode)  # storage: {url: URL, outage_s: S}: only the URL's own text changes
    if isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "url"), None)
    storage = str(node.value) if isinstance(node, yaml.ScalarNode) else ""
    if node is not None and storage.startswith("sqlite:///") and not storage.startswith("sqlite:////"):
        moved = f"sqlite:///{_path_from(new_dir, old_dir / storage.removeprefix('sqlite:///'))}"
        if inline:
            edits.append((node.start_mark.index, node.end_mark.index, json.dumps(moved)))  # a JSON string is YAML
        else:
            edits.append(_replace_line_value(text, node, f"{moved}  # lr-find: the database {spec.path} uses"))
    return edits


def _path_from(folder: Path, target: Path) -> str:
    """`target` relative to `folder` when they share more than the root, else absolute."""
    target = Path(os.path.normpath(target))
    if os.path.commonpath([folder, target]) == os.sep:
        return str(target)
    return os.path.relpath(target, folder)


def _replace_line_value(text: str, value: yaml.Node, new: str) -> tuple[int, int, str]:
    end = value.end_mark.index
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if text[end:line_end].strip().startswith("#"):
        end = line_end
    return value.start_mark.index, end, new
