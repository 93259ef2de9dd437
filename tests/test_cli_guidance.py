"""What a first reading of the commands' output relies on: `train --help` shows every option's
default as the configs hold it; `seprank` says what each field of its lines means before them; the
phase map's title mentions blank cells only when there is one."""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
from helpers import EXE, cli

from analysis.fitting import synthetic
from analysis.reporting import plots
from depthwidth.cli import MODEL_FLAGS, TRAIN_FLAGS
from depthwidth.config import ModelConfig, TrainConfig


def guided(*args) -> subprocess.CompletedProcess:
    """`depthwidth ARGS` on a terminal 100 columns wide (argparse wraps its help to it)."""
    return cli(*args, env={**os.environ, "COLUMNS": "100"})


def option_help(text: str) -> dict[str, str]:
    """Each `--option`'s help in argparse's listing, its lines joined."""
    out, current = {}, None
    for line in text.split("options:", 1)[1].splitlines():
        if m := re.match(r"\s{2}(-\w, )?(--[\w-]+)", line):
            current = m.group(2)
            out[current] = line[m.end() :]
        elif current:
            out[current] += " " + line.strip()
    return {k: " ".join(v.split()) for k, v in out.items()}


def test_train_help_shows_each_default_as_the_configs_hold_it():
    r = guided("train", "--help")
    assert r.returncode == 0, r.stderr
    helps = option_help(r.stdout)
    model, train = ModelConfig(), TrainConfig()
    for name in MODEL_FLAGS + TRAIN_FLAGS:
        value = getattr(model if name in MODEL_FLAGS else train, name)
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool) and not value:
            assert "default" not in helps[flag], flag  # a switch, off unless given
            continue
        assert f"(default: {value}" in helps[flag], (flag, helps[flag])
    assert "(default: pcfg)" in helps["--data"] and "(default: 0)" in helps["--seed"]
    # the one parametrization default, and why, where it is chosen
    assert ModelConfig().parametrization == "standard"
    assert "Kaplan et al. and Levine et al." in helps["--parametrization"]
    assert "threshold specs" in helps["--parametrization"]


def test_seprank_says_what_its_fields_mean_before_its_first_cell(tmp_path):
    r = guided("seprank", "--depth", "1..2", "--width", "2", "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    first_cell = next(i for i, line in enumerate(lines) if re.match(r"depth \d+ width \d+: rank", line))
    legend = "\n".join(lines[:first_cell])
    cell = lines[first_cell]
    for field in ("rank", "bound", "ln", "3^L", "vs d", "K"):
        assert field in cell and field in legend, field
    # every field the line has, in the order the legend gives it
    m = re.match(
        r"depth 1 width 2: rank \d+ \(<= bound \d+, ln [\d.]+ vs [\d.]+\); 3\^L = 3 vs d = 2: (\S+); K ", cell
    )
    assert m and m.group(1) in legend  # the regime is one the legend names
    assert re.search(r"K [\d:;]+; [\d.]+ s$", cell)


def test_the_phase_map_mentions_blank_cells_only_when_a_cell_was_not_run():
    P = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
    full = synthetic.make_runs("two_regime", [1, 2, 3], [16, 32], P, noise=0.0)
    report = {"threshold": {"claimed": False}}
    assert plots.phase_map(full, report).axes[0].get_title() == "Depth × width phase map"
    gap = full[~((full["depth"] == 3) & (full["width"] == 32))]
    fig = plots.phase_map(gap, report)
    assert fig.axes[0].get_title() == "Depth × width phase map (blank: not run)"
    cells = np.ma.getmaskarray(fig.axes[0].collections[0].get_array()).reshape(3, 2)
    assert cells[2, 1]  # the cell not run is left blank


def test_a_reader_that_stops_early_ends_the_command_without_a_traceback(tmp_path):
    """`depthwidth sweep plan SPEC | head`: the plan is longer than the pipe holds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [EXE, "sweep", "plan", "threshold-gpu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdout.readline().startswith(b"sweep 'threshold-gpu': 2016 trials")
    proc.stdout.close()  # as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141 and "Traceback" not in err, err
