"""Bundled sweep specs reachable by name from any folder (`sweep plan smoke`, `smoke.toml`), a local
file of the same name winning, each saying on stderr which file it read; `sweep specs` listing
them with their purpose and planned cost; and a plan for data that is not prepared yet. All
through the real `depthwidth` console script in a subprocess, run from a folder outside the
repository."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import cli, spec_toml, write_spec

SWEEPS = Path(__file__).resolve().parent.parent / "sweeps"


def test_a_bundled_spec_plans_by_name_from_any_folder(tmp_path):
    for arg in ("smoke", "smoke.toml"):
        r = cli("sweep", "plan", arg, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("sweep 'smoke': 36 trials")
        assert r.stderr.strip().splitlines() == [
            f"sweep: using the bundled spec 'smoke' ({SWEEPS / 'smoke.toml'})"
        ]
    assert not list(tmp_path.iterdir())  # a plan writes nothing


def test_a_local_file_of_the_same_name_wins_and_says_so(tmp_path):
    text = (SWEEPS / "smoke.toml").read_text().replace('name = "smoke"', 'name = "mine"')
    text = text.replace("depth = [1, 2, 3, 4]", "depth = [1]")
    write_spec(tmp_path, text, "smoke.toml")
    for arg in ("smoke", "smoke.toml"):
        r = cli("sweep", "plan", arg, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("sweep 'mine': 9 trials")
        note = r.stderr.strip().splitlines()
        assert len(note) == 1 and note[0].startswith("sweep: using the local file smoke.toml")
        assert str(SWEEPS / "smoke.toml") in note[0]
    r = cli("sweep", "plan", "nosuch", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "spec = 'nosuch' is invalid: no such file" in r.stderr and "smoke" in r.stderr


def test_sweep_specs_lists_each_bundled_spec_with_its_purpose_and_cost(tmp_path):
    r = cli("sweep", "specs", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # nothing but the table: no expansion notes between its rows
    lines = r.stdout.strip().splitlines()
    names = sorted(p.stem for p in SWEEPS.glob("*.toml"))
    assert lines[0].startswith(f"{len(names)} bundled specs") and len(lines) == len(names) + 1
    row = re.compile(r"[\w.-]+ +\d+ trials +[\d.e+]+ (GPU-h|CPU core-h)  \S.*")
    assert all(row.fullmatch(line) for line in lines[1:]), lines
    by_name = {line.split()[0]: line for line in lines[1:]}
    assert sorted(by_name) == names
    smoke = by_name["smoke"]
    assert "36 trials" in smoke and "CPU core-h" in smoke and "synthetic PCFG language" in smoke
    assert "GPU-h" in by_name["threshold-gpu"] and "cannot plan" not in r.stdout
    gpu_text = by_name["threshold-gpu-text"]
    assert "GPU-h" in gpu_text and ("not here yet" in gpu_text or "prepared" in gpu_text)


def test_a_plan_works_before_its_data_is_prepared_and_a_run_does_not(tmp_path):
    def later(vocab_size: int | None) -> str:
        """Two trials on token files not prepared yet, of a vocabulary `vocab_size` (None: unsaid)."""
        return spec_toml(
            "later",
            base={},
            model={"heads": 2, "seq_len": 16, "vocab_size": vocab_size},
            data={"source": "tokens", "path": "corpus"},
            grid={"depth": [1, 2], "width": [16]},
            budget={"tokens": 1e5},
        )

    spec = write_spec(tmp_path, later(512), "later.toml")
    r = cli("sweep", "plan", spec, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "2 trials" in r.stdout and f"data: {tmp_path / 'corpus'} is not here yet" in r.stdout
    r = cli("sweep", "run", spec, "--no-analyze", cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "results").exists()
    # without model.vocab_size the plan cannot size the embedding, and says why
    write_spec(tmp_path, later(None), "later.toml")
    r = cli("sweep", "plan", spec, cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_a_spec_listed_at_once_while_unchanged_is_planned_in_full_once_changed(tmp_path):
    """`sweep specs` takes a spec's cost from sweeps/bundled-costs.json only while the spec's
    content is the one it was computed from (tests/test_plan_figures.py holds it to the plan)."""
    from sweeps.plans.speccosts import fingerprint, planned, spec_line

    path = SWEEPS / "smoke.toml"
    kept = {"smoke": {"fingerprint": fingerprint(path), "trials": 7, "cpu_core_hours": 1.5}}
    assert re.search(r" 7 trials +1.5 CPU core-h ", spec_line("smoke", path, kept))
    changed = tmp_path / "smoke.toml"  # same content, one axis shorter
    changed.write_text(path.read_text().replace("depth = [1, 2, 3, 4]", "depth = [1]"))
    assert fingerprint(changed) != fingerprint(path)
    line = spec_line("smoke", changed, kept)
    assert f"{planned(changed)['trials']:>5} trials" in line and planned(changed)["trials"] == 9
    # comments are not content: a spec whose comments changed keeps its entry
    commented = tmp_path / "commented.toml"
    commented.write_text("# a note\n" + path.read_text())
    assert fingerprint(commented) == fingerprint(path)


def test_the_listed_data_note_is_the_plans(tmp_path, monkeypatch):
    """The note on data not here yet names the paths `sweep plan` names, unset variable or not."""
    from sweeps.plans.spec import load_spec
    from sweeps.plans.speccosts import missing_data

    path = SWEEPS / "threshold-gpu-text-pilot.toml"
    monkeypatch.delenv("DEPTHWIDTH_CORPUS", raising=False)
    assert missing_data(path) == list(load_spec(path, allow_missing_data=True).missing_data)
    assert missing_data(path) == ["${DEPTHWIDTH_CORPUS}"]
    monkeypatch.setenv("DEPTHWIDTH_CORPUS", str(tmp_path / "corpus"))
    assert missing_data(path) == list(load_spec(path, allow_missing_data=True).missing_data)
    assert missing_data(path) == [str(tmp_path / "corpus")]
    (tmp_path / "corpus").mkdir()
    assert missing_data(path) == []
