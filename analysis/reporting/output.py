"""A report folder holds one consistent report (docs/rules.md, "Report folders hold one consistent report"): its files are made in a
working folder and published together, the files an earlier report wrote and this one did not are
removed (report-files.json lists them), and report.json carries a fingerprint of its source, so
`depthwidth plot` never draws new data against old fits.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.readers.inputs import InputError
from depthwidth.clitools import reason, remove_orphaned
from depthwidth.clitools import terminate_cleanly as terminate_cleanly  # the one definition
from runstore.files import StoreError, atomic_file
from runstore.location import Location
from runstore.outputs import ANYWHERE, OutputError, claim_folder, nearest_existing

MANIFEST = "report-files.json"
WORK_PREFIX = ".depthwidth-report-"  # + pid + "-": an unfinished report's working folder
KEPT_PREFIX = "depthwidth-unpublished-report-"  # a finished report that could not be published
_WORK_RE = re.compile(re.escape(WORK_PREFIX) + r"(\d+)-")
# What a report folder written before report-files.json existed holds, beside its figures.
_LEGACY_FILES = (
    "report.json",
    "report.md",
    "report.html",
    "kaplan.json",
    "kaplan.md",
    "kaplan_side_by_side.png",
    "kaplan_side_by_side.pdf",
)


# -- the source's fingerprint -----------------------------------------------------------------
def _table_digest(df: pd.DataFrame) -> str:
    """Independent of row and column order (a store's compaction reorders rows)."""
    if df is None or df.empty:
        return "empty"
    df = df[sorted(df.columns, key=str)]
    try:
        rows = pd.util.hash_pandas_object(df, index=False).to_numpy()
    except TypeError:  # lists or dicts (from JSON lines) hash as their text
        df = df.astype({c: str for c in df.columns if df[c].dtype == object})
        rows = pd.util.hash_pandas_object(df, index=False).to_numpy()
    rows = np.sort(rows)
    cols = "\0".join(map(str, df.columns)).encode()
    return hashlib.sha256(cols + rows.tobytes()).hexdigest()


def fingerprint(runs: pd.DataFrame, curves: pd.DataFrame) -> dict:
    """Row counts and a hash of every value of the runs and curves as read."""
    return {
        "runs": len(runs),
        "curves": len(curves),
        "sha256": hashlib.sha256((_table_digest(runs) + _table_digest(curves)).encode()).hexdigest(),
    }


def check_fingerprint(
    report: dict, runs: pd.DataFrame, curves: pd.DataFrame, where: str, force: bool
) -> None:
    """Refuse (unless `force`) to draw a report's figures from data that is not what it fitted."""
    if force:
        return
    stored = report.get("source_fingerprint")
    now = fingerprint(runs, curves)
    if stored == now:
        return
    if not isinstance(stored, dict):
        why = "it was written before reports recorded their source's fingerprint"
    else:
        why = (
            f"its source {report['source']} has changed since it was fitted (now "
            f"{now['runs']} runs and {now['curves']} curve points; the report fitted "
            f"{stored.get('runs')} and {stored.get('curves')})"
        )
    raise InputError(
        f"{where} cannot be redrawn: {why}; run `depthwidth analyze` again to refit, "
        f"or give --force to draw the data as it is now against the old fits."
    )


# -- working folders ----------------------------------------------------------------------------
def _work_parent(dest: Location) -> Path:
    """Beside the destination (same disk, so it is found and cleaned by the next run), else the
    system's temporary folder."""
    if dest.is_local:
        probe = nearest_existing(Path(dest.root).absolute().parent)
        if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
            return probe
    return Path(tempfile.gettempdir())


# -- publishing ---------------------------------------------------------------------------------
# What a report writes: figures, report.{json,md,html}, kaplan.{json,md}, all at the top of its
# folder. A manifest read from disk may name nothing else (docs/rules.md, "Report folders hold one consistent report"):
# `analyze --out STORE` with a report-files.json naming runs.parquet must not delete the store.
REPORT_SUFFIXES = (".json", ".md", ".html", ".png", ".pdf")


def _inside(name: object) -> bool:
    """A name a report writes: one file directly in the report folder with a report's suffix,
    so a list read from disk reaches neither outside the folder nor any other file in it."""
    return (
        isinstance(name, str)
        and bool(name)
        and name == Path(name).name
        and name not in (MANIFEST, ".", "..")
        and Path(name).suffix in REPORT_SUFFIXES
    )


def _old_files(dest: Location) -> set[str]:
    """The files the report now in `dest` wrote: its manifest, or what an older report.json names."""
    with contextlib.suppress(StoreError, ValueError, TypeError, AttributeError, KeyError):
        if dest.exists(MANIFEST):
            return {n for n in json.loads(dest.read_text(MANIFEST))["files"] if _inside(n)}
        if dest.exists("report.json"):
            report = json.loads(dest.read_text("report.json"))
            names = list((report.get("figures") or {}).get("written") or [])
            names += list((report.get("relrnn") or {}).get("figures") or [])
            return {
                n
                for n in set(_LEGACY_FILES) | {f"{n}.{e}" for n in names for e in ("png", "pdf")}
                if _inside(n)
            }
    return set()


def _files(folder: Path) -> list[str]:
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    # report.json last: until it is replaced, the folder's report.json is the old one
    return sorted(names, key=lambda n: n == "report.json")


class ReportOutput:
    """Where a report (or a redraw, or the Kaplan comparison) is written: `work` first, then
    `publish` puts it in `dest` as a whole. A failure before publishing leaves `dest` as it was;
    a failure while publishing keeps the finished files and names their folder."""

    def __init__(self, dest: Location, flag: str = "the report folder"):
        self.dest = dest
        try:  # the one output guard: checked, and locked until the report is published
            self.claim = claim_folder(dest.root, flag, (), ANYWHERE) if dest.is_local else None
        except OutputError as exc:
            raise InputError(str(exc)) from None
        parent = _work_parent(dest)
        remove_orphaned(parent, _WORK_RE)
        self.work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-", dir=parent))

    def discard(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        if self.claim is not None:
            self.claim.release()

    def publish(self, replace: bool) -> None:
        """`replace`: this is a whole new report, so the files of the earlier one that it did
        not rewrite are removed; otherwise the files are added to the report already there."""
        names = _files(self.work)
        try:
            self._check_targets(names)
            old = _old_files(self.dest)
            if self.dest.is_local:
                self._copy_local(names)
            else:
                self.dest.upload_folder(self.work)
            listed = set(names) | (set() if replace else old)
            for stale in sorted(old - listed if replace else set()):
                if self.dest.exists(stale):
                    self.dest.delete(stale)
            self.dest.write_text(MANIFEST, json.dumps({"files": sorted(listed)}, indent=1))
        except (OSError, StoreError, InputError) as exc:
            kept = self._keep()
            if self.claim is not None:
                self.claim.release()
            raise InputError(
                f"{self.dest.display()} could not be written ({_why(exc)}); the "
                f"finished report is kept in {kept}."
            ) from None
        self.discard()

    def _check_targets(self, names: list[str]) -> None:
        """Every file can take its place: nothing is copied when one cannot."""
        if self.dest.kind() == "file":
            raise InputError(f"{self.dest.display()} is a file, not a folder")
        for name in [MANIFEST, *names]:
            if self.dest.kind(name) == "dir":
                raise InputError(f"{self.dest.display(name)} is a folder, where the report writes a file")

    def _copy_local(self, names: list[str]) -> None:
        root = Path(self.dest.root)
        root.mkdir(parents=True, exist_ok=True)
        for name in names:
            with atomic_file(root / name) as f, open(self.work / name, "rb") as g:
                shutil.copyfileobj(g, f)

    def _keep(self) -> Path:
        """Give the unpublished report a name the next run's clean-up leaves alone."""
        kept = self.work.with_name(KEPT_PREFIX + self.work.name.rpartition("-")[2])
        try:
            self.work.rename(kept)
            return kept
        except OSError:
            return self.work


def _why(exc: BaseException) -> str:
    return reason(exc).removesuffix(".")
