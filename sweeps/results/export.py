"""`depthwidth export STORE --mlflow URI | --wandb PROJECT | --tensorboard DIR`: push a results
store (for example one a cluster wrote) to experiment trackers, under the same exactly-once rule
as a live sweep (sweeps/plans/tracking.py): trials the tracker holds as finished are skipped, runs cut
short get only the steps they lack. Also the catch-up a sweep does at its start. No Ray.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from depthwidth.clitools import OutputError, check_output_dir, check_output_file, fail
from sweeps.plans.tracking import WANDB_MODES, Tracking, TrialInfo, check_available
from sweeps.results.feed import Trackers


def trial_label(trial) -> str:
    """A spec Trial's name in the view and in the trackers: its shape and its other axes."""
    m = trial.model
    parts = [f"d{m.depth} w{m.width}"]
    parts += [f"{k}={v}" for k, v in trial.axes if k not in ("depth", "width")]
    return " ".join(parts)


def trial_info(trial, sweep: str) -> TrialInfo:
    """A spec Trial as the trackers see it."""
    return TrialInfo(trial.trial_id, trial_label(trial), sweep, tuple(trial.axes), trial.configs_dict())


def stored_infos(store, runs) -> dict[str, TrialInfo]:
    """trial_id -> TrialInfo for every stored run: axes and labels from the store's spec where it
    still parses, otherwise the config fields that vary across the store."""
    from runstore.layout import SPEC
    from runstore.store import spec_versions
    from sweeps.plans.spec import SpecError, parse_spec

    sweep = str(runs["sweep"].iloc[0]) if "sweep" in runs and len(runs) else store.loc.name
    infos: dict[str, TrialInfo] = {}
    if store.exists(SPEC):
        for text in spec_versions(store.loc.read_text(SPEC)):
            try:
                spec = parse_spec(text, store.display(SPEC))
            except (SpecError, ValueError):
                continue
            for t in spec.trials:
                infos.setdefault(t.trial_id, trial_info(t, sweep))
                for alias in t.aliases:  # a store written before data paths were resolved
                    infos.setdefault(alias, trial_info(replace(t, trial_id=alias), sweep))
    configs = {}
    for row in runs.to_dict("records"):
        if row["trial_id"] in infos:
            continue
        try:
            configs[row["trial_id"]] = {s: json.loads(row[f"{s}_config"]) for s in ("model", "data", "train")}
        except (KeyError, TypeError, ValueError):
            configs[row["trial_id"]] = {"model": {"depth": int(row["depth"]), "width": int(row["width"])}}
    varying = _varying(configs.values())
    for tid, cfg in configs.items():
        axes = tuple((k if k in ("depth", "width") else f"{s}.{k}", cfg[s][k]) for s, k in varying)
        m = cfg.get("model", {})
        name = " ".join(
            [f"d{m.get('depth')} w{m.get('width')}"]
            + [f"{k}={v}" for k, v in axes if k not in ("depth", "width")]
        )
        infos[tid] = TrialInfo(tid, name, sweep, axes, cfg)
    return infos


def _varying(configs: Iterable[dict[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], set[str]] = {}
    for cfg in configs:
        for s, fields in cfg.items():
            for k, v in fields.items():
                seen.setdefault((s, k), set()).add(json.dumps(v, sort_keys=True))
    keys = [k for k, vals in seen.items() if len(vals) > 1]
    return sorted(keys, key=lambda sk: (sk[1] not in ("depth", "width"), sk[1] != "depth", sk))


def send_stored(
    trackers: Trackers, store, infos: dict[str, TrialInfo], only: Iterable[str] | None = None
) -> int:
    """Queue every stored trial (or those in `only`) for the trackers; returns how many."""
    runs = store.runs()
    if runs.empty:
        return 0
    wanted = set(runs["trial_id"]) if only is None else set(only) & set(runs["trial_id"])
    curves = store.curves()
    by_trial = {
        tid: g.sort_values("step").to_dict("records")
        for tid, g in curves[curves["trial_id"].isin(wanted)].groupby("trial_id")
    }
    n = 0
    for row in runs.to_dict("records"):
        tid = row["trial_id"]
        if tid in wanted and tid in infos:
            trackers.stored(infos[tid], row, by_trial.get(tid, []))
            n += 1
    return n


def build(tracking: Tracking, sweep: str, store, export: bool = False) -> Trackers:
    """The trackers of a sweep, or of `depthwidth export` (whose failures say to run it again,
    not that a sweep goes on)."""
    from sweeps.results.feed import EXPORT_STOPS
    from sweeps.results.trackers import factories

    enabled = factories(tracking, sweep, store.root if store.is_local else None, store.location)
    if export:  # an export's failure says to run it again, not how to send the results later
        return Trackers([replace(e, later="") for e in enabled], after=EXPORT_STOPS)
    return Trackers(enabled)


def check_mlflow_output(uri: str) -> None:
    """An MLflow URI that names a local database file (sqlite:///PATH) or folder (a path, or
    file:///PATH) goes through the output guard like any other output: never a results store's
    own files, never through a link to them."""
    if uri.startswith("sqlite:///"):
        check_output_file(uri[len("sqlite:///") :], "--mlflow", force=True)  # a database is added to
    elif uri.startswith("file://") or "://" not in uri:
        check_output_dir(uri.removeprefix("file://"), "--mlflow")


def check_tracker_outputs(tracking: Tracking, store_root: str | None) -> None:
    """The local folder and database a sweep's trackers write go through the output guard, before
    anything runs: `[tracking] tensorboard = "STORE/parts"` would be deleted with the parts."""
    from sweeps.results.trackers import tensorboard_dir

    if tracking.tensorboard:
        check_output_dir(tensorboard_dir(tracking, store_root), "tracking.tensorboard")
    if tracking.mlflow:
        check_mlflow_output(tracking.mlflow)


def cmd_export(args: argparse.Namespace) -> int:
    from runstore.files import StoreError
    from runstore.layout import RUNS
    from runstore.store import ResultStore
    from sweeps.plans.spec import SpecError

    tracking = Tracking().with_flags(
        mlflow=args.mlflow,
        wandb=args.wandb,
        wandb_mode=args.wandb_mode,
        tensorboard=args.tensorboard,
        wandb_entity=args.wandb_entity,
    )
    if not tracking.enabled:
        return fail("export needs a tracker: give --mlflow URI, --wandb PROJECT or --tensorboard DIR.")
    try:
        check_available(tracking, prefix="--")
        if args.tensorboard:  # a file there fails only after the store is read: say so now
            check_output_dir(args.tensorboard, "--tensorboard")
        if args.mlflow:
            check_mlflow_output(args.mlflow)
        store = ResultStore(args.store)
        if not store.exists(RUNS):
            raise StoreError(f"store = {args.store!r} is invalid: it holds no {RUNS}.")
        runs = store.runs()
        infos = stored_infos(store, runs)
    except (SpecError, StoreError, OutputError) as exc:
        return fail(str(exc))
    sweep = next(iter(infos.values())).sweep if infos else store.loc.name
    trackers = build(tracking, sweep, store, export=True)
    n = send_stored(trackers, store, infos)
    print(f"exporting {n} trials of sweep {sweep!r} to {', '.join(tracking.enabled)} ...", flush=True)
    warnings = trackers.close(timeout=None)
    for w in warnings:
        print(w, file=sys.stderr)
    sent = trackers.summary()
    for s in sent:
        print(
            f"{s.name}: {'failed' if s.failed else 'done'}; {s.runs_created} runs created, "
            f"{s.steps_logged} steps logged (trials it already held are skipped)"
        )
    return 1 if any(s.failed for s in sent) else 0


def add_tracker_flags(p: argparse.ArgumentParser, tensorboard_dir_only: bool = False) -> None:
    p.add_argument("--mlflow", metavar="URI", help="MLflow tracking URI, e.g. sqlite:///mlruns.db")
    p.add_argument("--wandb", metavar="PROJECT", help="Weights & Biases project")
    p.add_argument("--wandb-mode", choices=WANDB_MODES, help="W&B mode (default online)")
    p.add_argument("--wandb-entity", metavar="ENTITY", help="W&B entity (user or team)")
    if tensorboard_dir_only:
        p.add_argument("--tensorboard", metavar="DIR", help="write TensorBoard event files to DIR")
    else:
        p.add_argument(
            "--tensorboard",
            nargs="?",
            const=True,
            metavar="DIR",
            help="TensorBoard event files (default: <store>/tensorboard)",
        )


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="push a results store to MLflow, W&B or TensorBoard",
        description="Send every stored trial to experiment trackers: one "
        "run per trial, each evaluation once; what a tracker "
        "already holds is skipped.",
    )
    p.add_argument("store", help="results store folder or URI, e.g. results/smoke")
    add_tracker_flags(p, tensorboard_dir_only=True)
    p.set_defaults(func=cmd_export)
