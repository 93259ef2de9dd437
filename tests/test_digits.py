"""Sequential digits (the UCI digits scikit-learn ships, read pixel by pixel; docs/science.md §6):
shapes and vocabulary, a fixed disjoint train/val split, batches as a pure function of
(seed, split, index), one fixed pixel permutation for pdigits, the CLI and the sweep spec, and
a short run that learns well above chance.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from depthwidth.cli import main
from depthwidth.config import ConfigError, DataConfig, ModelConfig, TrainConfig
from depthwidth.data import make_data, resolve
from depthwidth.data.digits import CLASSES, IGNORE, LEVELS, PIXELS, load_images, pixel_order, split_indices
from depthwidth.train import train

SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"


def task(kind: str = "digits", seed: int = 0, val_fraction: float = 0.2):
    return make_data(DataConfig(source=kind, seed=seed, val_fraction=val_fraction), 0)


def test_the_bundled_images():
    pixels, labels = load_images()
    assert pixels.shape == (1797, 64) and labels.shape == (1797,)
    assert pixels.min() == 0 and pixels.max() == 16 and set(np.unique(labels)) == set(range(10))


def test_shapes_vocabulary_and_targets():
    d = task()
    x, y = d.batch("train", 0, 16)
    assert x.shape == y.shape == (16, PIXELS) and x.dtype == y.dtype == torch.long
    assert d.vocab_size == LEVELS == 17 and d.seq_len == PIXELS == 64
    assert 0 <= int(x.min()) and int(x.max()) <= 16
    assert (y[:, :-1] == IGNORE).all()  # the answer only at the last pixel
    assert ((y[:, -1] >= 0) & (y[:, -1] < CLASSES)).all()
    model, _ = resolve(ModelConfig(family="relrnn", seq_len=8), DataConfig(source="pdigits"))
    assert (model.seq_len, model.vocab_size) == (64, 17)


def test_inputs_are_the_images_and_labels_in_pixel_order():
    pixels, labels = load_images()
    d = task()
    _, val = split_indices(len(labels), 0.2, 0)
    x, y = d.batch("val", 0, 5)  # validation batch 0 = the first 5 validation images, in order
    assert np.array_equal(x.numpy(), pixels[val[:5]]) and np.array_equal(y[:, -1].numpy(), labels[val[:5]])


def test_split_is_disjoint_complete_and_fixed():
    n = 1797
    train_a, val_a = split_indices(n, 0.2, seed=0)
    train_b, val_b = split_indices(n, 0.2, seed=0)
    assert np.array_equal(train_a, train_b) and np.array_equal(val_a, val_b)
    assert len(val_a) == round(n * 0.2) and len(train_a) + len(val_a) == n
    assert not set(train_a) & set(val_a) and set(train_a) | set(val_a) == set(range(n))
    _, val_other = split_indices(n, 0.2, seed=1)
    assert not np.array_equal(val_a, val_other)  # the data seed picks the split
    # through the source: no validation image among the training images
    d = task()
    tr = {r.tobytes() for r in d.splits()["train"][0]}
    va = [r.tobytes() for r in d.splits()["val"][0]]
    pixels = load_images()[0]
    duplicates = len(pixels) - len({r.tobytes() for r in pixels})  # identical images in UCI digits
    assert sum(v in tr for v in va) <= duplicates


def test_batches_are_a_pure_function_of_seed_split_index():
    a, b = task(seed=3), task(seed=3)
    assert torch.equal(a.batch("train", 7, 8)[0], b.batch("train", 7, 8)[0])
    assert not torch.equal(a.batch("train", 7, 8)[0], a.batch("train", 8, 8)[0])
    rows = a.batch("train", 7, 64)[0].numpy()
    assert len({r.tobytes() for r in rows}) >= 60  # drawn without replacement within a batch
    # validation batches walk the validation set in order and wrap around
    n_val = len(a.splits()["val"][1])
    whole = torch.cat([a.batch("val", i, 32)[0] for i in range(math.ceil(n_val / 32))])
    assert torch.equal(whole[:n_val], torch.from_numpy(a.splits()["val"][0]))
    assert torch.equal(whole[n_val:], whole[: len(whole) - n_val])


def test_permutation_is_fixed_and_shared_by_the_splits():
    perm = pixel_order("pdigits", 0)
    assert sorted(perm.tolist()) == list(range(64)) and not np.array_equal(perm, np.arange(64))
    assert np.array_equal(perm, pixel_order("pdigits", 0))
    assert not np.array_equal(perm, pixel_order("pdigits", 1))
    assert np.array_equal(pixel_order("digits", 5), np.arange(64))
    plain, permuted = task("digits"), task("pdigits")
    for split, index in (("train", 2), ("val", 1)):
        x, y = plain.batch(split, index, 16)
        px, py = permuted.batch(split, index, 16)  # same rows, pixels reordered
        assert torch.equal(px, x[:, perm]) and torch.equal(py, y)


def test_accuracy_and_baseline():
    d = task()
    x, y = d.batch("val", 0, 4)
    logits = torch.zeros(4, 64, LEVELS)
    logits[torch.arange(4), -1, y[:, -1]] = 5.0
    logits[0, -1, 12] = 9.0  # an out-of-class output is not a prediction: classes 0..9 only
    m = d.extra_metrics(logits, y)
    assert m["accuracy"] == 1.0 and m["baseline_loss"] == pytest.approx(math.log(10))
    logits[1, -1, (y[1, -1] + 1) % 10] = 6.0
    assert d.extra_metrics(logits, y)["accuracy"] == 0.75
    assert abs(d.unigram_entropy() - math.log(10)) < 0.01  # nearly balanced classes


def test_nu_longer_than_the_pixels_is_rejected():
    with pytest.raises(ConfigError, match=r"ModelConfig\.nu = 70 is invalid"):
        resolve(ModelConfig(family="relrnn", nu=70), DataConfig(source="digits"))


def test_a_short_run_learns_well_above_chance():
    """rnn, width 32, 150 steps of 32 images: far above the 10% of chance (measured 0.56 on
    the 359 validation images; 0.45 at step 75)."""
    torch.set_num_threads(1)
    result = train(
        ModelConfig(family="rnn", width=32, depth=1),
        DataConfig(source="digits", val_fraction=0.2),
        TrainConfig(
            steps=150, batch_size=32, lr=1e-2, warmup_steps=0, eval_every=75, eval_batches=12, seed=0
        ),
    )
    assert result.status == "ok", result.error
    assert result.curve[-1]["accuracy"] > 0.4, result.curve
    assert result.final_val_loss < math.log(10)


def test_cli_trains_on_digits_and_refuses_a_bad_spec(tmp_path, capsys):
    out = tmp_path / "run.json"
    code = main(
        [
            "train",
            "--family",
            "lstm",
            "--width",
            "8",
            "--data",
            "pdigits",
            "--steps",
            "4",
            "--batch-size",
            "8",
            "--json",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and "pdigits: UCI digits pixel by pixel" in text and "accuracy=" in text
    assert out.is_file()
    bad = tmp_path / "bad.json"
    assert main(["train", "--data", "digits:5", "--json", str(bad)]) == 2
    assert "--data = 'digits:5' is invalid" in capsys.readouterr().err and not bad.exists()


def test_kerg_cpu_study_spec():
    from collections import Counter

    from sweeps.plans.spec import load_spec

    spec = load_spec(SWEEPS / "kerg-cpu.toml")
    by = Counter((t.model.family, t.data.source) for t in spec.trials)
    for src in ("copy", "denoise"):  # 2 T × 2 seeds, × 2 ρ for the screened models
        assert by[("relrnn", src)] == by[("rellstm", src)] == 8 and by[("lstm", src)] == 4
    for src in ("digits", "pdigits"):  # no T axis, 2 seeds
        assert by[("relrnn", src)] == 4 and by[("memrnn", src)] == 2
    assert len(spec.trials) == 72
    assert {t.model.rho for t in spec.trials if t.model.family == "rellstm"} == {3, 15}
    for t in spec.trials:
        assert t.train.steps == (400 if t.data.source in ("digits", "pdigits") else 150)
        assert t.train.eval_every == 50 and t.model.width == 64
    assert spec.resources.gpus == 0
