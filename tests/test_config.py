"""Config validation: every bad field is rejected with one sentence naming the field and value."""

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from depthwidth.config import PRESETS, ConfigError, DataConfig, ModelConfig, TrainConfig, from_name

BAD = [
    (ModelConfig, dict(width=30, heads=4), "ModelConfig.width = 30", "divisible by heads = 4"),
    (ModelConfig, dict(depth=0), "ModelConfig.depth = 0", "at least 1"),
    (ModelConfig, dict(attention="cosine"), "ModelConfig.attention = 'cosine'", "softmax, linear"),
    (ModelConfig, dict(seq_len=1), "ModelConfig.seq_len = 1", "at least 2"),
    (ModelConfig, dict(heads=0), "ModelConfig.heads = 0", "at least 1"),
    (ModelConfig, dict(width=0), "ModelConfig.width = 0", "at least 1"),
    (ModelConfig, dict(ffn_ratio=-1.0), "ModelConfig.ffn_ratio = -1.0", ">= 0"),
    (ModelConfig, dict(family="gru"), "ModelConfig.family = 'gru'", "transformer"),
    (
        ModelConfig,
        dict(parametrization="ntk"),
        "ModelConfig.parametrization = 'ntk'",
        "standard, mup, completep",
    ),
    (ModelConfig, dict(base_depth=0), "ModelConfig.base_depth = 0", "at least 1"),
    (ModelConfig, dict(depth_alpha=0.2), "ModelConfig.depth_alpha = 0.2", "[0.5, 1]"),
    (
        ModelConfig,
        dict(parametrization="completep", residual=False),
        "ModelConfig.residual = False",
        "needs residual",
    ),
    (TrainConfig, dict(eps=0.0), "TrainConfig.eps = 0.0", "positive"),
    (ModelConfig, dict(vocab_size=1), "ModelConfig.vocab_size = 1", ">= 2"),
    (ModelConfig, dict(depth=2.5), "ModelConfig.depth = 2.5", "expected int"),
    (ModelConfig, dict(depth=True), "ModelConfig.depth = True", "expected int"),
    (ModelConfig, dict(residual="yes"), "ModelConfig.residual = 'yes'", "expected bool"),
    (ModelConfig, dict(family="relrnn", nu=0, rho=0), "ModelConfig.rho = 0", "nu + rho"),
    (ModelConfig, dict(nu=-1), "ModelConfig.nu = -1", ">= 0"),
    (ModelConfig, dict(init_std=0.0), "ModelConfig.init_std = 0.0", "positive"),
    (DataConfig, dict(source="wiki"), "DataConfig.source = 'wiki'", "pcfg"),
    (DataConfig, dict(source="text"), "DataConfig.path = ''", "needs a path"),
    (DataConfig, dict(vocab_size=1), "DataConfig.vocab_size = 1", "at least 2"),
    (DataConfig, dict(val_fraction=1.0), "DataConfig.val_fraction = 1.0", "(0, 1)"),
    (DataConfig, dict(task_length=0), "DataConfig.task_length = 0", "at least 1"),
    (DataConfig, dict(branching=1), "DataConfig.branching = 1", "at least 2"),
    (TrainConfig, dict(steps=0), "TrainConfig.steps = 0", "at least 1"),
    (TrainConfig, dict(lr=-1e-3), "TrainConfig.lr = -0.001", "positive"),
    (TrainConfig, dict(lr=float("nan")), "TrainConfig.lr = nan", "finite"),
    (TrainConfig, dict(device="tpu"), "TrainConfig.device = 'tpu'", "auto, cpu, cuda"),
    (TrainConfig, dict(precision="fp8"), "TrainConfig.precision = 'fp8'", "fp32, bf16"),
    (TrainConfig, dict(beta2=1.0), "TrainConfig.beta2 = 1.0", "[0, 1)"),
    (TrainConfig, dict(batch_size=0), "TrainConfig.batch_size = 0", "at least 1"),
    (TrainConfig, dict(min_lr_ratio=2.0), "TrainConfig.min_lr_ratio = 2.0", "[0, 1]"),
]


@pytest.mark.parametrize(
    "cls,kwargs,names,why", BAD, ids=[f"{c.__name__}-{list(k)[0]}" for c, k, _, _ in BAD]
)
def test_bad_field_is_named_with_its_value(cls, kwargs, names, why):
    with pytest.raises(ConfigError) as err:
        cls(**kwargs)
    msg = str(err.value)
    assert msg.startswith(names), msg
    assert why in msg, msg
    assert msg.count(".") >= 1 and "\n" not in msg


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match="ModelConfig has no field 'widht'"):
        ModelConfig.from_dict({"widht": 64})


@pytest.mark.parametrize(
    "cfg",
    [
        ModelConfig(depth=3, width=48, heads=3, attention="linear"),
        DataConfig(source="copy", task_length=200),
        TrainConfig(lr=1e-3, device="cpu", compile=True),
    ],
)
def test_round_trip_dict_json_toml(cfg):
    cls = type(cfg)
    assert cls.from_dict(cfg.to_dict()) == cfg
    assert cls.from_json(cfg.to_json()) == cfg
    assert cls.from_toml(cfg.to_toml()) == cfg
    assert json.loads(cfg.to_json()) == cfg.to_dict()


def test_configs_are_frozen():
    cfg = ModelConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.depth = 5  # type: ignore[misc]


def test_presets_and_overrides():
    for name in PRESETS:
        assert isinstance(from_name(name), ModelConfig)
    cfg = from_name("small", width=128, parametrization="mup")
    assert (cfg.depth, cfg.width, cfg.parametrization) == (4, 128, "mup")
    assert cfg.width_mult == 2.0
    with pytest.raises(ConfigError, match="preset = 'huge' is unknown"):
        from_name("huge")
    with pytest.raises(ConfigError, match="ModelConfig.width = 65"):
        from_name("small", width=65)


def test_float_field_accepts_int_and_stores_float():
    cfg = TrainConfig(lr=1)
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_a_string_written_as_toml_reads_back_as_itself(text):
    """Any text (every character but a lone surrogate, beyond the Basic Multilingual Plane and
    control characters included) goes into a TOML file and comes back the same."""
    import tomllib

    from depthwidth.config import toml_string

    assert tomllib.loads(f"a = {toml_string(text)}\n")["a"] == text


SCALARS = (
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
)


@settings(max_examples=200, deadline=None)
@given(value=SCALARS | st.lists(SCALARS, max_size=5) | st.just(float("nan")))
def test_a_value_written_as_toml_reads_back_as_itself(value):
    """The one TOML value writer (a spec `design --propose` writes, a config's TOML): booleans,
    any 64-bit integer, any float (inf and nan as TOML spells them), text, and lists of these."""
    import math

    import tomllib

    from depthwidth.config import toml_value

    got = tomllib.loads(f"a = {toml_value(value)}\n")["a"]
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(got)
    else:
        assert got == value and type(got) is type(value)


def test_a_lone_surrogate_is_refused_as_toml():
    from depthwidth.config import toml_string

    with pytest.raises(ValueError, match="lone surrogate"):
        toml_string("a\ud800b")
