"""A results store behind an S3 URI, end to end: a sweep through the real CLI (embedded Ray, Tune's
checkpoints on S3 too), the runs and curves read back over S3, the analysis uploaded into the
store's analysis/ folder, a rerun that finds every trial stored, and bad buckets refused.

No cloud bucket can exist here, so moto's S3 server on 127.0.0.1 stands in for one: it speaks the
S3 API, and pyarrow's S3 filesystem (the same client a real bucket would get) talks to it through
`?endpoint_override=127.0.0.1:PORT&scheme=http` in the URI.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pandas as pd
import pytest
from helpers import cli, spec_toml, write_spec

pafs = pytest.importorskip("pyarrow.fs")
pytest.importorskip("moto.server", reason="moto[server] (the test extra) is not installed")
MOTO = [sys.executable, "-m", "moto.server"]  # this environment's moto, never another on PATH

SPEC = spec_toml(
    "s3sweep",
    train={"batch_size": 8, "eval_batches": None, "threads": 1},
    grid={"depth": [1, 2], "width": [8]},
    budget={"steps": 10},
)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """(env with credentials, endpoint query) of a moto S3 server on a free 127.0.0.1 port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*MOTO, "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto_server did not start:\n{log.read_text()[-2000:]}") from None
            time.sleep(0.2)
    creds = dict(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **creds}
    try:
        with pytest.MonkeyPatch.context() as mp:  # this process talks to the bucket too
            for k, v in creds.items():
                mp.setenv(k, v)
            yield env, f"endpoint_override=127.0.0.1:{port}&scheme=http"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def make_bucket(query: str, bucket: str) -> pafs.FileSystem:
    fs, _ = pafs.FileSystem.from_uri(f"s3://{bucket}?{query}&allow_bucket_creation=true")
    fs.create_dir(bucket)
    return fs


@pytest.mark.slow
def test_sweep_store_and_analysis_on_s3(s3, tmp_path):
    env, query = s3
    fs = make_bucket(query, "sweeps")
    uri = f"s3://sweeps/team/s3sweep?{query}"
    spec = write_spec(tmp_path, SPEC, "s3.toml")

    r = cli("sweep", "run", str(spec), "--storage", uri, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 trials (2 ok)" in r.stdout
    assert (
        r.stdout.strip().splitlines()[-1] == f"report: s3://sweeps/team/s3sweep/analysis/report.html?{query}"
    )

    root = "sweeps/team/s3sweep"
    names = {i.base_name for i in fs.get_file_info(pafs.FileSelector(root))}
    assert {"runs.parquet", "curves.parquet", "spec.toml", "analysis"} <= names
    runs = pd.read_parquet(f"{root}/runs.parquet", filesystem=fs)
    assert sorted(runs["depth"]) == [1, 2] and set(runs["status"]) == {"ok"}
    curves = pd.read_parquet(f"{root}/curves.parquet", filesystem=fs)
    assert sorted(curves.groupby("trial_id")["step"].max()) == [10, 10]
    with fs.open_input_stream(f"{root}/spec.toml") as f:
        assert f.read().decode() == SPEC
    report = {i.base_name for i in fs.get_file_info(pafs.FileSelector(f"{root}/analysis"))}
    assert {"report.json", "report.md", "loss_vs_n.png"} <= report
    # Tune kept its trial checkpoints on S3 while the trials ran; finished trials' ones are gone
    tune = [
        i
        for i in fs.get_file_info(pafs.FileSelector(f"{root}/tune", recursive=True))
        if i.base_name.startswith("checkpoint_")
    ]
    assert tune == []

    again = cli("sweep", "run", str(spec), "--storage", uri, "--no-analyze", env=env)
    assert again.returncode == 0 and "all 2 trials are already in" in again.stdout
    shown = cli("sweep", "results", uri, env=env)
    assert shown.returncode == 0 and set(runs["trial_id"]) <= set(shown.stdout.split())

    out = tmp_path / "local-report"
    local = cli("analyze", uri, "--out", str(out), "--bootstrap", "10", env=env)
    assert local.returncode == 0, local.stderr
    assert (out / "report.json").is_file() and f"report: {out}/report.md" in local.stdout
    replot = cli("plot", str(out), env=env)  # the data is read back from S3
    assert replot.returncode == 0, replot.stderr

    # plot and kaplan take the store's URI too: the stored report is read and redrawn in place
    with fs.open_output_stream(f"{root}/analysis/loss_vs_n.png") as f:
        f.write(b"stale")
    remote = cli("plot", uri, env=env)
    assert remote.returncode == 0, remote.stderr
    with fs.open_input_stream(f"{root}/analysis/loss_vs_n.png") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    kap = cli("kaplan", uri, "--bootstrap", "10", env=env)
    assert kap.returncode == 0, kap.stderr
    # written beside the store, never into it (a later analysis rewrites its report folder)
    assert fs.get_file_info(f"{root}_kaplan/kaplan.md").type == pafs.FileType.File
    assert fs.get_file_info(f"{root}/analysis/kaplan.md").type == pafs.FileType.NotFound


def test_bad_s3_storage_is_refused_before_anything_runs(s3, tmp_path):
    env, query = s3
    spec = write_spec(tmp_path, SPEC, "s3.toml")
    uri = f"s3://no-such-bucket/x?{query}"
    r = cli("sweep", "run", str(spec), "--storage", uri, env=env)
    assert r.returncode == 2
    assert r.stderr == (
        f"depthwidth: error: --storage = {uri!r} is invalid: its bucket "
        f"'no-such-bucket' does not exist; create it first.\n"
    )
    fs, _ = pafs.FileSystem.from_uri(f"s3://x?{query}")
    assert fs.get_file_info("no-such-bucket").type == pafs.FileType.NotFound  # nothing created

    fs = make_bucket(query, "files")
    with fs.open_output_stream("files/taken") as f:
        f.write(b"not a folder")
    r = cli("sweep", "run", str(spec), "--storage", f"s3://files/taken/sub?{query}", env=env)
    assert r.returncode == 2 and "'files/taken' is a file, not a folder." in r.stderr

    r = cli("analyze", f"s3://files/missing?{query}", env=env)
    assert r.returncode == 2
    assert r.stderr == f"depthwidth: error: input path 's3://files/missing?{query}' does not exist.\n"
    r = cli("plot", f"s3://files?{query}", env=env)
    assert r.returncode == 2 and "no report.json under 's3://files?" in r.stderr


def test_analysis_reads_a_csv_behind_a_uri(s3, tmp_path):
    env, query = s3
    fs = make_bucket(query, "tables")
    rows = ["depth,width,loss"] + [
        f"{d},{w},{3.0 - 0.1 * d - 0.001 * w:.4f}" for d in (1, 2, 3) for w in (16, 32, 64)
    ]
    with fs.open_output_stream("tables/mine.csv") as f:
        f.write(("\n".join(rows) + "\n").encode())
    r = cli("analyze", f"s3://tables/mine.csv?{query}", "--bootstrap", "5", env=env)
    assert r.returncode == 0, r.stderr
    assert "9 runs analysed" in r.stdout
    assert f"report: s3://tables/mine_analysis/report.md?{query}" in r.stdout
    assert fs.get_file_info("tables/mine_analysis/report.json").type == pafs.FileType.File


def test_an_interrupted_trials_checkpoint_is_found_and_read_back_over_s3(s3, tmp_path):
    """What a rerun does after a killed driver, on S3: find the checkpoints of an unfinished trial
    in the store's tune/ folder, furthest first, hand their URIs (options kept) to the trial, which
    downloads the furthest; a finished trial's folders are deleted."""
    from ray import tune

    from runstore.store import ResultStore
    from sweeps.running.resume import clear_checkpoints, find_checkpoints

    _, query = s3
    fs = make_bucket(query, "ckpts")
    store = ResultStore(f"s3://ckpts/st?{query}")
    for step in (4, 8):
        local = tmp_path / f"c{step}"
        local.mkdir()
        (local / "state.bin").write_bytes(bytes([step]))
        tune.Checkpoint.from_directory(str(local)).set_metadata({"trial_id": "abc", "step": step})
        dest = f"ckpts/st/tune/run1/abc/checkpoint_00000{step // 4}"
        fs.create_dir(dest, recursive=True)
        pafs.copy_files(str(local), dest, destination_filesystem=fs)

    found = find_checkpoints(store, ["abc", "other"])
    assert found == {
        "abc": [
            (f"s3://ckpts/st/tune/run1/abc/checkpoint_000002?{query}", 8),
            (f"s3://ckpts/st/tune/run1/abc/checkpoint_000001?{query}", 4),
        ]
    }
    back = tune.Checkpoint(found["abc"][0][0]).to_directory(str(tmp_path / "back"))
    assert (tmp_path / "back" / "state.bin").read_bytes() == bytes([8]) and back == str(tmp_path / "back")
    assert clear_checkpoints(store, ["abc"]) == 1
    assert fs.get_file_info("ckpts/st/tune/run1/abc").type == pafs.FileType.NotFound
