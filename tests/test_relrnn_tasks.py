"""Copy and denoise tasks (Arjovsky et al. 2016 as in Kerg et al. 2020, docs/science.md §6): layout,
seeding, hand-computed baseline and entropy, accuracy on the last 10 outputs; and the clear
errors for bad ν/ρ (negative, ν + ρ = 0, ν > T) in the configs, in data.resolve and the CLI.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from depthwidth.cli import main
from depthwidth.config import ConfigError, DataConfig, ModelConfig
from depthwidth.data import check_task_fits, make_data, resolve
from depthwidth.data.tasks import CopyTask


def task(kind: str, T: int, seed: int = 0) -> CopyTask:
    return make_data(DataConfig(source=kind, task_length=T, seed=seed), 64)


def test_copy_layout():
    T = 7
    d = task("copy", T)
    x, y = d.batch("train", 3, 5)
    assert x.shape == y.shape == (5, T + 20) and d.seq_len == T + 20 and d.vocab_size == 10
    assert x.dtype == y.dtype == torch.long
    sym = x[:, :10]
    assert ((sym >= 1) & (sym <= 8)).all()
    assert (x[:, 10 : T + 9] == 0).all() and (x[:, T + 9] == 9).all() and (x[:, T + 10 :] == 0).all()
    assert (y[:, : T + 10] == 0).all() and torch.equal(y[:, T + 10 :], sym)


def test_denoise_layout():
    T = 30
    x, y = task("denoise", T).batch("val", 0, 64)
    assert (x[:, T + 9] == 9).all() and (x[:, T + 10 :] == 0).all()
    head = x[:, : T + 9]
    for row, target in zip(head, y):
        pos = torch.nonzero(row).flatten()
        assert len(pos) == 10  # distinct positions, all among the first T + 9 steps
        assert torch.equal(row[pos], target[-10:])  # in order
        assert (target[: T + 10] == 0).all()
    first = torch.nonzero(head)[:, 1].view(64, 10)[:, 0]
    assert first.float().std() > 0  # positions vary between sequences


def test_batches_are_a_pure_function_of_seed_split_index():
    a, b = task("denoise", 20, seed=1), task("denoise", 20, seed=1)
    assert torch.equal(a.batch("train", 5, 4)[0], b.batch("train", 5, 4)[0])
    assert not torch.equal(a.batch("train", 5, 4)[0], a.batch("train", 6, 4)[0])
    assert not torch.equal(a.batch("train", 5, 4)[0], a.batch("val", 5, 4)[0])
    assert not torch.equal(a.batch("train", 5, 4)[0], task("denoise", 20, seed=2).batch("train", 5, 4)[0])


def test_symbols_are_uniform_over_the_alphabet():
    x, _ = task("copy", 5).batch("train", 0, 4000)
    counts = np.bincount(x[:, :10].flatten().numpy(), minlength=9)[1:]
    assert counts.min() > 0.9 * 5000 and counts.max() < 1.1 * 5000


def test_baseline_entropy_and_accuracy_by_hand():
    d = task("copy", 100)
    assert d.baseline_loss() == pytest.approx(10 * math.log(8) / 120)
    p0, ps = 110 / 120, 10 / (8 * 120)
    assert d.unigram_entropy() == pytest.approx(-(p0 * math.log(p0) + 8 * ps * math.log(ps)))
    x, y = d.batch("val", 0, 6)
    perfect = torch.nn.functional.one_hot(y, 10).float()
    m = d.extra_metrics(perfect, y)
    assert m["accuracy"] == 1.0 and m["baseline_loss"] == d.baseline_loss()
    wrong = perfect.clone()
    wrong[:3, -10:] = torch.nn.functional.one_hot((y[:3, -10:] % 8) + 1, 10).float()
    wrong[:, :-10] = 0  # earlier outputs do not count
    assert d.extra_metrics(wrong, y)["accuracy"] == pytest.approx(0.5)
    # The memoryless baseline really is what a position-aware guesser scores.
    guess = torch.full((6, 120, 10), -1e9)
    guess[:, :110, 0] = 0.0
    guess[:, 110:, 1:9] = 0.0
    ce = torch.nn.functional.cross_entropy(guess.reshape(-1, 10), y.reshape(-1))
    assert ce.item() == pytest.approx(d.baseline_loss(), rel=1e-6)


def test_resolve_takes_sequence_length_and_vocabulary_from_the_task():
    m, data = resolve(ModelConfig(family="relrnn", seq_len=64), DataConfig(source="copy", task_length=50))
    assert (m.seq_len, m.vocab_size) == (70, 10) and data.seq_len == 70


@pytest.mark.parametrize("kw,field", [(dict(nu=-1), "nu"), (dict(rho=-2), "rho"), (dict(nu=0, rho=0), "rho")])
def test_bad_nu_rho_rejected_by_config(kw, field):
    with pytest.raises(ConfigError, match=rf"ModelConfig\.{field} = -?\d+ is invalid"):
        ModelConfig(family="relrnn", **kw)


def test_nu_longer_than_the_delay_is_rejected_where_model_meets_data():
    data = DataConfig(source="copy", task_length=100)
    check_task_fits(ModelConfig(family="relrnn", nu=100), data)  # ν = T is allowed
    with pytest.raises(ConfigError, match=r"ModelConfig\.nu = 101 is invalid.*task_length = 100"):
        check_task_fits(ModelConfig(family="rellstm", nu=101), data)
    with pytest.raises(ConfigError, match=r"ModelConfig\.nu = 101"):
        resolve(ModelConfig(family="relrnn", nu=101), data)
    check_task_fits(ModelConfig(family="lstm", nu=500), data)  # ν means nothing to an LSTM
    with pytest.raises(ConfigError, match=r"ModelConfig\.nu = 65 .*seq_len = 64"):
        check_task_fits(ModelConfig(family="relrnn", nu=65, seq_len=64), DataConfig(source="pcfg"))


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--nu", "150", "--data", "copy:100"], "ModelConfig.nu = 150"),
        (["--nu", "-1", "--data", "copy:100"], "ModelConfig.nu = -1"),
        (["--nu", "0", "--rho", "0", "--data", "denoise:50"], "ModelConfig.rho = 0"),
    ],
)
def test_cli_bad_nu_rho_exit_2_and_write_nothing(args, needle, tmp_path, capsys):
    out = tmp_path / "result.json"
    code = main(["train", "--family", "relrnn", "--steps", "1", "--json", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (("test", 0, 4), "split = 'test'"),
        (("train", -1, 4), "index = -1"),
        (("train", 0, 0), "batch_size = 0"),
    ],
)
def test_bad_batch_requests(args, needle):
    from depthwidth.data.base import DataError

    with pytest.raises(DataError, match=needle):
        task("copy", 10).batch(*args)
