"""Sweep specs: expansion (product, where, points, budgets, the seed rule), trial ids recomputed
by hand, the ready-made specs, and bad input through the real CLI: each bad spec gives its exact
one-sentence message, exit code 2, and writes nothing. No Ray is started here."""

from __future__ import annotations

import hashlib
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write_spec

from depthwidth.config import TrainConfig
from sweeps import cli
from sweeps.plans.spec import SpecError, load_spec, parse_spec, tomllib, trial_id_of
from sweeps.plans.where import WhereError, compile_where, evaluate_where

REPO = Path(__file__).resolve().parent.parent
BASE = """name = "t"
[model]
heads = 2
seq_len = 16
[data]
vocab_size = 16
[grid]
depth = [1, 2]
width = [8, 16]
[budget]
steps = 10
"""
FIELDS_MODEL = (
    "family, depth, width, heads, ffn_ratio, vocab_size, seq_len, attention, layernorm, "
    "residual, tied_embeddings, bias, parametrization, base_width, base_depth, depth_alpha, "
    "init_std, nu, rho"
)
FUNCS = "log, log2, log10, log3, exp, sqrt, abs, min, max, round"


# sizes past what a 64-bit count holds, in a trial's row or in a config field
FULL = "more than the store's 64-bit counts hold (below 2**63)."
WIDE = "it must fit a 64-bit integer (below 2**63)."


def sub(old: str, new: str) -> str:
    assert old in BASE
    return BASE.replace(old, new)


BAD_SPECS = [
    ("name = \n", "{p} is not valid TOML: Invalid value (at line 1, column 8)."),
    (
        BASE + "[grids]\ndepth = [1]\n",
        "{p}: unknown key 'grids'; known keys: name, description, where, "
        "model, data, train, grid, points, budget, resources, storage, tracking, adaptive, halving.",
    ),
    (sub('name = "t"\n', ""), '{p}: name is missing; every sweep needs a name (e.g. name = "smoke").'),
    (
        sub('name = "t"', 'name = "a b"'),
        "{p}: name = 'a b' is invalid: use 1-100 letters, digits, '-', '_' or '.'.",
    ),
    (
        sub("heads = 2", "heads = 2\nlayers = 3"),
        "{p}: [model] has no field 'layers'; known fields: " + FIELDS_MODEL + ".",
    ),
    (
        sub("heads = 2", 'heads = "two"'),
        "{p}: the trial at depth=1, width=8 is invalid: "
        "ModelConfig.heads = 'two' is invalid: expected int, got str.",
    ),
    (
        sub("heads = 2", "heads = [2]"),
        "{p}: model.heads = [2] is invalid: fixed fields take one value; sweep lists in [grid].",
    ),
    (sub("depth = [1, 2]", "depth = 3"), "{p}: grid.depth = 3 is invalid: an axis is a list of values."),
    (
        sub("depth = [1, 2]", "depth = []"),
        "{p}: grid.depth = [] is invalid: an axis needs at least one value.",
    ),
    (
        sub("depth = [1, 2]", "depth = [1, 1]"),
        "{p}: grid.depth = [1, 1] is invalid: the axis repeats a value.",
    ),
    (
        sub("depth = [1, 2]", "depth = [1, 2]\nlayers = [3]"),
        "{p}: axis 'layers' is not a field of ModelConfig, DataConfig or TrainConfig.",
    ),
    (
        sub("depth = [1, 2]", "depth = [1, 2]\nvocab_size = [16, 32]"),
        "{p}: axis 'vocab_size' is ambiguous "
        "(a field of ModelConfig and DataConfig); write model.vocab_size or data.vocab_size.",
    ),
    (
        sub("depth = [1, 2]", 'depth = [1, 2]\n"optim.lr" = [0.1]'),
        "{p}: axis 'optim.lr' has an unknown qualifier 'optim'; use model., data. or train.",
    ),
    (
        sub("width = [8, 16]", "width = [8, 15]"),
        "{p}: the trial at depth=1, width=15 is invalid: "
        "ModelConfig.width = 15 is invalid: width must be divisible by heads = 2.",
    ),
    (
        sub("depth = [1, 2]", 'depth = [1, 2]\nfamily = ["transformer", "gru"]'),
        "{p}: the trial at depth=1, "
        "family='gru', width=8 is invalid: ModelConfig.family = 'gru' is invalid: expected one of transformer, "
        "lstm, rnn, memrnn, relrnn, rellstm.",
    ),
    (
        sub("depth = [1, 2]", 'depth = [1, "2"]'),
        "{p}: the trial at depth='2', width=8 is invalid: "
        "ModelConfig.depth = '2' is invalid: expected int, got str.",
    ),
    (
        sub("depth = [1, 2]", 'depth = [1]\nfamily = ["relrnn"]\nnu = [40]'),
        "{p}: the trial at depth=1, "
        "family='relrnn', nu=40, width=8 is invalid: ModelConfig.nu = 40 is invalid: the short-term buffer "
        "is longer than the sequence, ModelConfig.seq_len = 16.",
    ),
    (
        sub("steps = 10", "steps = 10\ntokens = 1000"),
        "{p}: budget = {{'steps': 10, 'tokens': 1000}} is "
        "invalid: give exactly one of steps, tokens, compute, tokens_per_param.",
    ),
    (sub("steps = 10", "tokens = -5"), "{p}: budget.tokens = -5 is invalid: must be positive."),
    (
        sub("steps = 10", "steps = 10\nepochs = 3"),
        "{p}: [budget] has no key 'epochs'; known keys: steps, "
        "tokens, compute, tokens_per_param, evals, min_steps, warmup_fraction, from_one_run.",
    ),
    (
        sub("[grid]", "[train]\nsteps = 5\n[grid]"),
        "{p}: train.steps = 5 is invalid: [budget] sets steps; give it in one place.",
    ),
    (
        sub("steps = 10", "tokens = 10"),
        "{p}: budget.tokens = 10 is invalid: it buys less than one step of 32x16 tokens.",
    ),
    (BASE + "[resources]\ncpus = 0\n", "{p}: resources.cpus = 0 is invalid: must be positive."),
    (
        BASE + "[resources]\ngpus = 2\n",
        "{p}: resources.gpus = 2 is invalid: each worker trains on one "
        "device, so ask for a fraction in [0, 1] (more devices: resources.workers).",
    ),
    (
        BASE + "[resources]\nmemory = 3\n",
        "{p}: [resources] has no key 'memory'; known keys: cpus, gpus, "
        "workers, sharding, max_concurrent, max_failures, gpu_memory_gb, gpu_tflops, cpu_gflops.",
    ),
    (
        BASE + '[resources]\ngpus = "lots"\n',
        "{p}: resources.gpus = 'lots' is invalid: expected a fraction in [0, 1] or \"auto\".",
    ),
    (BASE + "[resources]\nworkers = 0\n", "{p}: resources.workers = 0 is invalid: must be positive."),
    (
        BASE + '[resources]\nsharding = "zero3"\n',
        "{p}: resources.sharding = 'zero3' is invalid: expected one of ddp, fsdp.",
    ),
    (
        BASE + "[train]\nbatch_size = 8\n[resources]\nworkers = 3\n",
        "{p}: resources.workers = 3 is "
        "invalid: the trial at depth=1, width=8 has batch_size 8, which 3 workers cannot split into "
        "equal shards.",
    ),
    (
        BASE + "[resources]\nworkers = 2\ngpus = 0.5\n",
        "{p}: resources.gpus = 0.5 is invalid: the "
        "workers of one trial cannot share a GPU (NCCL runs one rank per GPU); ask for 1 per worker, or "
        '"auto".',
    ),
    (
        BASE + '[resources]\ngpus = "auto"\ngpu_memory_gb = 1\n',
        "{p}: resources.gpus = 'auto' is "
        "invalid: the trial at depth=1, width=8 needs about 0.000508 GB, more than one 1 GB GPU holds with "
        "25% head-room; no number of FSDP workers that divides its batch brings it under one GPU.",
    ),
    (
        BASE + "[resources]\ngpus = 0.001\ngpu_memory_gb = 0.1\n",
        "{p}: resources.gpus = 0.001 is invalid: "
        "the trial at depth=1, width=8 needs about 0.000508 GB, more than 0.0001 GB (0.001 of a 0.1 GB GPU).",
    ),
    (
        BASE + "[resources]\ngpus = 0.5\ngpu_memory_gb = 0.0001\n",
        "{p}: the trial at depth=1, width=8 is "
        "invalid: it needs about 0.000508 GB to train, more than a whole 0.0001 GB GPU "
        "(resources.gpu_memory_gb).",
    ),
    *[
        (sub(old, new), f"{{p}}: the trial at depth=1, width={w} is invalid: {why}")
        for old, new, w, why in [
            ("width = [8, 16]", "width = [8, 1000000000]", 1000000000, "it has 1.2e+19 parameters, " + FULL),
            (
                "steps = 10",
                "steps = 1000000000000000000000",
                8,
                "TrainConfig.steps = 1000000000000000000000 is invalid: " + WIDE,
            ),
            (
                "steps = 10",
                "tokens = 1e30",
                8,
                "TrainConfig.steps = 1953125000000000038837157888 is invalid: " + WIDE,
            ),
            ("steps = 10", "tokens = 1e20", 8, "it has 1e+20 training tokens, " + FULL),
        ]
    ],
    (BASE + "[storage]\nbucket = 'x'\n", "{p}: [storage] has no key 'bucket'; the only key is 'path'."),
    (
        'where = "width %% == 0"\n' + BASE,
        "{p}: where = 'width %% == 0' is invalid: it does not parse (invalid syntax).",
    ),
    (
        'where = "widht > 8"\n' + BASE,
        "{p}: where = 'widht > 8' is invalid: the name 'widht' is not a "
        "field of ModelConfig, DataConfig or TrainConfig.",
    ),
    (
        "where = \"__import__('os').system('x') == 0\"\n" + BASE,
        "{p}: where = \"__import__('os').system('x') "
        '== 0" is invalid: function "__import__(\'os\').system" is not one of ' + FUNCS + ".",
    ),
    (
        'where = "width.real > 2"\n' + BASE,
        "{p}: where = 'width.real > 2' is invalid: 'width.real' is not "
        "a field; qualify fields only as model.X, data.X or train.X.",
    ),
    (
        'where = "width > 100"\n' + BASE,
        "{p}: where = 'width > 100' is invalid: it leaves no grid point to run.",
    ),
    (
        BASE + "[[points]]\ndepth = 3\nwidht = 8\n",
        "{p} [[points]] #1: axis 'widht' is not a field of ModelConfig, DataConfig or TrainConfig.",
    ),
    # 1 and 1.0 are the same learning rate once the config holds it: one trial, asked for twice
    (
        sub("width = [8, 16]", "width = [8, 16]\nlr = [1, 1.0]"),
        "{p}: grid.lr = [1, 1.0] is invalid: the axis repeats a value.",
    ),
    (
        sub("width = [8, 16]", "width = [8, 16]\nheads = [2, 4]"),
        "{p}: grid.heads = [2, 4] is invalid: [model] sets heads = 2 too; give it in one place.",
    ),
    (
        'where = "round(width, ndigits=0) > 1"\n' + BASE,
        "{p}: where = 'round(width, ndigits=0) > 1' is "
        "invalid: function 'round' takes its arguments by position only, not by name (ndigits=0).",
    ),
    # intermediate values are bounded before they are computed: no memory or CPU bombs
    (
        "where = \"'x' * 10**11 == 'y'\"\n" + BASE,
        "{p}: where = \"'x' * 10**11 == 'y'\" is invalid: "
        "repeating a string 100000000000 times makes more than 10000 characters.",
    ),
    (
        'where = "[0] * 10**11 == [1]"\n' + BASE,
        "{p}: where = '[0] * 10**11 == [1]' is invalid: "
        "repeating a list 100000000000 times makes more than 10000 elements.",
    ),
    (
        'where = "((((10**64)**64)**64)**64) > depth"\n' + BASE,
        "{p}: where = '((((10**64)**64)**64)**64) > "
        "depth' is invalid: (about 10**64) ** 64 would be larger than 2**1024, the range of a float.",
    ),
    (
        "where = \"'%999999999d' % depth == 'x'\"\n" + BASE,
        "{p}: where = \"'%999999999d' % depth == 'x'\" "
        "is invalid: % formats strings, which a filter has no use for; compare them instead.",
    ),
    (
        'where = "round(depth, -10**8) == 0"\n' + BASE,
        "{p}: where = 'round(depth, -10**8) == 0' is "
        "invalid: round(x, -100000000) asks for more than 64 digits.",
    ),
]


@pytest.mark.parametrize("text,message", BAD_SPECS, ids=[f"bad{i:02d}" for i in range(len(BAD_SPECS))])
def test_bad_spec_exact_message_exit_2_nothing_written(tmp_path, capsys, text, message):
    spec = write_spec(tmp_path, text, "bad.toml")
    store = tmp_path / "store"
    commands = [["run", str(spec), "--storage", str(store)]]
    if "needs about" not in message:  # `plan` shows a too-big trial instead of refusing it
        commands.append(["plan", str(spec), "--storage", str(store)])
    for command in commands:
        assert cli.main(command) == 2
        err = capsys.readouterr().err
        assert err == "depthwidth: error: " + message.format(p=spec) + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


def test_bad_command_line_input(tmp_path, capsys):
    spec = write_spec(tmp_path, BASE, "ok.toml")
    blocker = tmp_path / "afile"
    blocker.write_text("")
    cases = [
        (
            ["run", str(tmp_path / "missing.toml")],
            f"spec = '{tmp_path / 'missing.toml'}' is invalid: no such file.",
        ),
        (
            ["run", str(spec), "--max-concurrent", "0"],
            "--max-concurrent = 0 is invalid: it must be at least 1.",
        ),
        (
            ["run", str(spec), "--storage", str(blocker / "store")],
            f"--storage = '{blocker / 'store'}' is invalid: '{blocker}' is a file, not a folder.",
        ),
        (
            ["run", str(spec), "--storage", str(tmp_path / "s"), "--rerun", "nope"],
            "--rerun = 'nope' is invalid: it is neither a trial_id of this sweep nor one of all, ok, diverged, failed, stopped.",
        ),
        (
            ["results", str(tmp_path / "nowhere")],
            f"store = '{tmp_path / 'nowhere'}' is invalid: it holds no runs.parquet.",
        ),
    ]
    for args, message in cases:
        assert cli.main(args) == 2, args
        assert capsys.readouterr().err == f"depthwidth: error: {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "ok.toml"]


def refused_run(tmp_path: Path, store: Path, capsys) -> str:
    """`sweep run` of BASE into `store`, refused with exit code 2: what it said on stderr."""
    spec = write_spec(tmp_path, BASE, "t.toml")
    assert cli.main(["run", str(spec), "--storage", str(store)]) == 2
    return capsys.readouterr().err


def test_store_of_another_sweep_is_refused(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "spec.toml").write_text('name = "other"\n')
    assert refused_run(tmp_path, store, capsys) == (
        f"depthwidth: error: name = 't' is invalid: the store {store} holds "
        f"the sweep 'other'; give this sweep its own storage.path or --storage.\n"
    )
    assert (store / "spec.toml").read_text() == 'name = "other"\n'


def test_a_filter_on_config_fields_keeps_the_spec_text(tmp_path):
    """The spec's text is what the store records and what a Ray Job runs: a `where` that names
    config fields must leave it whole, so the store's guard against another sweep still holds."""
    from runstore.store import ResultStore
    from sweeps.running.service import prepare

    text = 'where = "width % heads == 0 and depth <= log3(width)"\n' + BASE
    spec = parse_spec(text, "x.toml")
    assert spec.text == text
    store = tmp_path / "store"
    ResultStore(str(store)).write_spec(spec.text, "x.toml")
    assert (store / "spec.toml").read_text() == text
    other = parse_spec(text.replace('name = "t"', 'name = "u"'), "y.toml")
    with pytest.raises(SpecError, match="holds the sweep 't'; give this sweep its own storage"):
        prepare(other, str(store))


@pytest.mark.parametrize("content", ["\x00\x01 garbage = = =", 'description = "no name"\n'])
def test_a_store_whose_spec_is_not_a_sweep_spec_is_left_untouched(tmp_path, capsys, content):
    store = tmp_path / "store"
    store.mkdir()
    (store / "spec.toml").write_text(content)
    err = refused_run(tmp_path, store, capsys)
    assert err.startswith(f"depthwidth: error: {store / 'spec.toml'} is not a sweep spec (")
    assert err.endswith("; it was left untouched: move it aside, or give this sweep its own storage.\n")
    assert (store / "spec.toml").read_text() == content
    assert sorted(p.name for p in store.iterdir()) == ["spec.toml"]


def test_a_store_whose_runs_table_is_a_folder_is_refused(tmp_path, capsys):
    store = tmp_path / "store"
    (store / "runs.parquet").mkdir(parents=True)
    assert refused_run(tmp_path, store, capsys) == (
        f"depthwidth: error: {store / 'runs.parquet'} is a folder, not a "
        f"parquet file; it was left untouched: move it aside to start the "
        f"store over.\n"
    )
    assert [p.name for p in store.iterdir()] == ["runs.parquet"]


def test_min_steps_zero_the_default_is_accepted():
    spec = parse_spec(BASE.replace("steps = 10", "tokens = 51200\nmin_steps = 0"), "x.toml")
    assert spec.budget.min_steps == 0 and all(t.train.steps == 100 for t in spec.trials)


def test_expansion_product_where_points_and_dedup():
    text = (
        'where = "depth * width <= 32"\n'
        + BASE.replace("depth = [1, 2]", "depth = [1, 2, 4]")
        + "[[points]]\ndepth = 8\nwidth = 8\n[[points]]\ndepth = 1\nwidth = 8\n"
    )
    spec = parse_spec(text, "x.toml")
    got = [(t.model.depth, t.model.width) for t in spec.trials]
    # product in axis order, filtered; the second point repeats (1, 8) and is dropped
    assert got == [(1, 8), (1, 16), (2, 8), (2, 16), (4, 8), (8, 8)]
    assert len({t.trial_id for t in spec.trials}) == len(got)
    assert all(t.train.steps == 10 and t.data.vocab_size == 16 and t.model.heads == 2 for t in spec.trials)
    assert spec.storage == "results/t" and spec.resources.cpus == 1.0


def test_trial_id_is_sha256_of_canonical_config_without_execution_knobs():
    spec = parse_spec(BASE, "x.toml")
    t = spec.trials[0]
    parts = {"model": t.model.to_dict(), "data": t.data.to_dict(), "train": t.train.to_dict()}
    for k in ("device", "threads", "compile", "checkpoint_every"):
        del parts["train"][k]
    later = (("model", "base_depth"), ("model", "depth_alpha"), ("train", "eps"), ("train", "schedule"))
    for section, k in later + (("train", "cooldown_fraction"), ("train", "cooldown")):
        del parts[section][k]  # later fields, at the value that reproduces earlier behaviour
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    assert t.trial_id == hashlib.sha256(blob).hexdigest()[:16]
    # order of keys in the file does not matter; execution knobs do not; the learning rate does
    reordered = parse_spec(
        BASE.replace("heads = 2\nseq_len = 16", "seq_len = 16\nheads = 2").replace(
            "[data]", "[train]\nthreads = 3\ndevice = 'cpu'\n[data]"
        ),
        "y.toml",
    )
    assert [x.trial_id for x in reordered.trials] == [x.trial_id for x in spec.trials]
    changed = parse_spec(BASE.replace("[data]", "[train]\nlr = 0.001\n[data]"), "z.toml")
    assert not {x.trial_id for x in changed.trials} & {x.trial_id for x in spec.trials}
    assert trial_id_of(t.model, t.data, t.train.replace(threads=8)) == t.trial_id


def test_trial_ids_of_stores_written_before_completep_and_eps_are_kept():
    """Ids as computed before base_depth, depth_alpha and eps existed: an existing store's trials
    are found again and not rerun; setting a new field makes a new trial."""
    from depthwidth.config import DataConfig, ModelConfig

    assert trial_id_of(ModelConfig(), DataConfig(), TrainConfig()) == "de00d7e35260ad25"
    mup = ModelConfig(depth=4, width=32, parametrization="mup")
    assert trial_id_of(mup, DataConfig(seed=1), TrainConfig(lr=1e-3)) == "8f309cbb26e17b77"
    assert trial_id_of(mup, DataConfig(seed=1), TrainConfig(lr=1e-3, eps=1e-6)) != "8f309cbb26e17b77"
    cp = mup.replace(parametrization="completep")
    assert trial_id_of(cp, DataConfig(seed=1), TrainConfig(lr=1e-3)) != "8f309cbb26e17b77"


def test_seed_means_train_seed_and_qualified_names_reach_their_config():
    spec = parse_spec(BASE.replace("width = [8, 16]", "width = [8]\nseed = [0, 1]"), "x.toml")
    assert [(t.train.seed, t.data.seed) for t in spec.trials] == [(0, 0), (1, 0), (0, 0), (1, 0)]
    spec = parse_spec(
        BASE.replace("width = [8, 16]", 'width = [8]\n"data.seed" = [3]\nmodel.vocab_size = [32]'), "x.toml"
    )
    assert {(t.data.seed, t.train.seed, t.model.vocab_size) for t in spec.trials} == {(3, 0, 32)}


def test_budgets_set_steps_from_tokens_compute_and_tokens_per_param():
    # N = L·(4d² + 2·d·d_ff) = 12·L·d² at d_ff = 4d (Kaplan Table 1): depth 2, width 16 -> 6144
    n = 12 * 2 * 16**2
    one = BASE.replace("depth = [1, 2]", "depth = [2]").replace("width = [8, 16]", "width = [16]")
    tokens_per_step = 32 * 16  # default batch 32 x seq_len 16
    # Training FLOPs per token: 3 x forward = 6N + 6·L·T·d (the count the store records).
    c_per_token = 6 * n + 6 * 2 * 16 * 16
    cases = {
        "tokens = 51200": 51200 / tokens_per_step,
        f"compute = {c_per_token * 40960:.1f}": 40960 / tokens_per_step,
        "tokens_per_param = 20": 20 * n / tokens_per_step,
    }
    for line, steps in cases.items():
        spec = parse_spec(one.replace("steps = 10", line + "\nevals = 4"), "x.toml")
        (t,) = spec.trials
        assert t.train.steps == round(steps), line
        assert t.train.eval_every == t.train.steps // 4
        assert t.train.warmup_steps == TrainConfig().warmup_steps  # 20 < steps: kept


def test_where_language_is_arithmetic_only():
    env = {"width": 64, "depth": 3, "heads": 4, "model.width": 64}
    assert evaluate_where(compile_where("width % heads == 0 and depth <= log3(width)"), env)
    assert not evaluate_where(compile_where("depth > log3(model.width) or width in [8, 16]"), env)
    assert evaluate_where(compile_where("not (width < 2 ** 5) and abs(-depth) == 3"), env)
    for bad in (
        "open('x')",
        "[x for x in (1,)]",
        "lambda: 1",
        "width if depth else 2",
        "(1).real",
        "depth ** 1000",
        "__import__('os')",
        "print",
        "x = 1",
    ):
        with pytest.raises(WhereError):
            evaluate_where(compile_where(bad), env)


def test_where_can_use_n_params_and_aspect():
    text = 'where = "n_params == 12 * depth * width ** 2 and aspect >= 8"\n' + BASE
    spec = parse_spec(text, "x.toml")
    assert [(t.model.depth, t.model.width) for t in spec.trials] == [(1, 8), (1, 16), (2, 16)]


SHIPPED_SPECS = sorted((REPO / "sweeps").glob("*.toml"))


# specs that read the reference data (../shared/data, relative to the repository root)
READS_SHARED_DATA = {"threshold-cpu"}
# specs that read a prepared corpus named by DEPTHWIDTH_CORPUS (`depthwidth data prepare`)
READS_PREPARED_CORPUS = {"threshold-gpu-text", "threshold-gpu-text-pilot"}


@pytest.fixture(scope="module")
def prepared_corpus(tmp_path_factory):
    """A small corpus prepared as a user would (a 300-symbol BPE, within the specs' vocabulary)."""
    pytest.importorskip("tokenizers")
    from depthwidth.data.prepare import Request, prepare

    folder = tmp_path_factory.mktemp("corpus")
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    (folder / "c.txt").write_text(
        "\n\n".join(" ".join(words[(i + j) % 10] for j in range(200)) for i in range(40))
    )
    prepare(
        Request(str(folder / "c.txt"), str(folder / "prepared"), vocab=300, val_fraction=0.3),
        stream=io.StringIO(),  # no progress lines
    )
    return folder / "prepared"


@pytest.mark.parametrize("path", SHIPPED_SPECS, ids=[p.stem for p in SHIPPED_SPECS])
def test_every_shipped_spec_parses_keeps_its_text_and_plans(path, capsys, request, monkeypatch):
    """Each ready-made spec: its text (what the store and a Ray Job receive) parses back to the
    same document, and `sweep plan` prints every trial."""
    if path.stem in READS_SHARED_DATA:
        request.getfixturevalue("shared_data")  # skips where the reference data is absent
        monkeypatch.chdir(REPO)  # the spec's relative data path is read from the repository root
    if path.stem in READS_PREPARED_CORPUS:
        monkeypatch.setenv("DEPTHWIDTH_CORPUS", str(request.getfixturevalue("prepared_corpus")))
    spec = load_spec(path)
    assert spec.name == path.stem and spec.trials
    assert tomllib.loads(spec.text) == tomllib.loads(path.read_text(encoding="utf-8"))
    assert cli.main(["plan", str(path), "--storage", "/nonexistent/store"]) == 0
    out = capsys.readouterr().out
    assert f"sweep {spec.name!r}: {len(spec.trials)} trials" in out
    assert sum(t.trial_id in out for t in spec.trials) == len(spec.trials)
    assert ("GPU-hours" in out) == (spec.resources.gpus > 0)


def test_the_shipped_specs_include_the_documented_ones():
    assert {p.stem for p in SHIPPED_SPECS} >= {
        "smoke",
        "threshold",
        "kaplan-aspect",
        "relrnn-smoke",
        "relrnn-copy",
        "threshold-cpu",
    }
    assert len(load_spec(REPO / "sweeps" / "smoke.toml").trials) == 36  # 12 shapes x 3 lr


def test_threshold_grid_spans_both_regimes_with_completep_lr_axis_and_seeds():
    spec = load_spec(REPO / "sweeps" / "threshold.toml")
    assert {t.model.parametrization for t in spec.trials} == {"completep"}
    assert len({t.train.seed for t in spec.trials}) == 2
    lrs = sorted({t.train.lr for t in spec.trials})
    assert len(lrs) == 3 and lrs[2] / lrs[0] == pytest.approx(10.0, rel=0.01)  # half a decade apart
    per_shape = {}
    for t in spec.trials:
        per_shape.setdefault((t.model.depth, t.model.width), set()).add((t.train.lr, t.train.seed))
    assert all(len(v) == 6 for v in per_shape.values())  # every shape at every lr and seed
    below = [t for t in spec.trials if t.model.depth < math.log(t.model.width, 3)]
    above = [t for t in spec.trials if t.model.depth > math.log(t.model.width, 3)]
    assert below and above  # L_th = log_3(d_x) (docs/science.md §1) is crossed at every width
    assert min(t.model.depth for t in spec.trials) == 2 and max(t.model.depth for t in spec.trials) == 24
    assert min(t.model.width for t in spec.trials) == 64 and max(t.model.width for t in spec.trials) == 2048


def test_kaplan_aspect_trials_sit_in_fixed_n_bands():
    from depthwidth.accounting import count_params

    spec = load_spec(REPO / "sweeps" / "kaplan-aspect.toml")
    bands: dict[int, list[float]] = {}
    for t in spec.trials:
        n = count_params(t.model).n_params
        centre = min((4e6, 1.6e7, 6.4e7), key=lambda c: abs(math.log(n / c)))
        assert abs(math.log(n / centre)) < 0.2, (t.model.depth, t.model.width, n)
        bands.setdefault(int(centre), []).append(t.model.width / t.model.depth)
    for aspects in bands.values():
        assert max(aspects) / min(aspects) >= 10  # a wide range of shapes at fixed N (Kaplan Figure 5)


def test_cli_module_does_not_import_ray():
    code = "import sys, sweeps.cli; sys.exit('ray' in sys.modules or 'torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_planning_a_sweep_does_not_import_torch(tmp_path):
    """The driver expands, budgets and plans (N, FLOPs, memory) without torch: importing it costs
    seconds of the sweep's start-up on a small machine, and only the trial workers train."""
    spec = write_spec(tmp_path, BASE.replace("steps = 10", "tokens_per_param = 5\nmin_steps = 2"), "s.toml")
    code = (
        "import sys; from sweeps.plans.spec import load_spec; from sweeps.plans.plan import plan_text; "
        f"s = load_spec({str(spec)!r}); text = plan_text(s); "
        "print(len(s.trials), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["4", "False"]
