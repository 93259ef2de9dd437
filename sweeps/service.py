"""Run, resume and extend a sweep on Ray Tune, embedded or on a cluster (docs/design.md "Execution").

Every run of the same spec runs only what the store lacks: finished trials are never rerun
(unless --rerun names them), unfinished ones resume from their last checkpoint, new grid points
run fresh. Trials are Ray Tune trials of one function trainable with reused actors; this driver
is the store's single writer, recording each trial the moment its final report arrives.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import math
import os
import sys
from typing import Any, Iterable, TextIO

from depthwidth.results import SPEC, STATUSES, Location, StoreError
from sweeps.spec import SpecError, SweepSpec, tomllib
from sweeps.store import ResultStore
from sweeps.tracking import FLUSH_TIMEOUT_S, Tracking, check_available

# Tune's own loggers (CSV/JSON/TensorBoard per trial) and its table are off: the store and the
# progress view replace them, and they cost ~0.3 s per trial on 2 CPUs.
_QUIET_ENV = {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1", "RAY_AIR_NEW_OUTPUT": "0",
              "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0"}
CHUNK_TRIALS = 1000  # trials per Tune run (see _tune)
_QUIET_LOGGERS = ("ray.tune.analysis.experiment_analysis", "ray.tune.tune", "ray.tune.impl.tuner_internal")
# Without --verbose, trial errors reach the user as the closing paragraph, not as Tune's tracebacks.
_SILENT_LOGGERS = ("ray.tune", "ray.train", "ray.air")


@contextlib.contextmanager
def _quiet_tune(verbose: bool = False):
    saved = {k: os.environ.get(k) for k in _QUIET_ENV}
    names = _QUIET_LOGGERS + (() if verbose else _SILENT_LOGGERS)
    levels = {n: logging.getLogger(n).level for n in names}
    os.environ.update(_QUIET_ENV)
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR if verbose else logging.CRITICAL)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for n, lvl in levels.items():
            logging.getLogger(n).setLevel(lvl)


def _lighter_tune() -> None:
    """Two costs Tune adds to every sweep that depthwidth does not need (docs/bench/sweeps.md,
    "fixed cost"); without these module attributes (another Ray) nothing changes but speed.

    - Tune gives every trainable a runtime_env holding PL_DISABLE_FORK=1, for PyTorch Lightning,
      which depthwidth does not use. An actor with any runtime_env gets a new worker process, not
      one of the idle workers Ray started with torch and the trainable preloaded: ~3 s before the
      first trial runs, on 2 cores. The variables Tune forwards on purpose (cloud credentials,
      Ray Train's settings) still make a runtime_env when they are set.
    - Tune's usage tag counts the run's callbacks by class name, and imports its MLflow, W&B,
      Comet and Aim integrations to learn their names: with mlflow and wandb installed that is
      ~3 s of imports on every sweep, trackers on or off. The sweep's callbacks are none of
      those, so they are counted as Tune counts any other callback, without the imports."""
    from sweeps.driver import StoreWriter, TrackerFeed
    try:
        from ray.air._internal import usage
        from ray.tune.execution import class_cache
    except ImportError:
        return
    defaults = getattr(class_cache, "DEFAULT_ENV_VARS", None)
    if isinstance(defaults, dict):
        defaults.pop("PL_DISABLE_FORK", None)
    count = getattr(usage, "_count_callbacks", None)
    if count is None or getattr(count, "_depthwidth", False):
        return

    def count_callbacks(given):
        given = list(given or [])
        if given and all(isinstance(c, (StoreWriter, TrackerFeed)) for c in given):
            return {"CustomCallback": len(given)}
        return count(given)

    count_callbacks._depthwidth = True
    usage._count_callbacks = count_callbacks


def label(trial) -> str:
    m = trial.model
    parts = [f"d{m.depth} w{m.width}"]
    parts += [f"{k}={v}" for k, v in trial.axes if k not in ("depth", "width")]
    return " ".join(parts)


def select_trials(spec: SweepSpec, store: ResultStore, rerun: Iterable[str]) -> tuple[list, set[str]]:
    """(trials to run, ids to rerun from scratch). --rerun takes trial ids or a status."""
    runs = store.runs()
    finished = set(runs["trial_id"])
    ids = {t.trial_id for t in spec.trials}
    again: set[str] = set()
    for item in rerun:
        if item == "all":
            again |= ids & finished
        elif item in STATUSES:
            again |= ids & set(runs.loc[runs["status"] == item, "trial_id"])
        elif item in ids:
            again.add(item)
        else:
            raise SpecError(f"--rerun = {item!r} is invalid: it is neither a trial_id of this sweep "
                            f"nor one of all, {', '.join(STATUSES)}.")
    todo = [t for t in spec.trials if t.trial_id not in finished or t.trial_id in again]
    return todo, again


def prepare(spec: SweepSpec, storage: str | None, rerun: Iterable[str] = ()) -> tuple[ResultStore, list, set[str]]:
    """Every check that needs no cluster; raises SpecError/StoreError before anything is written."""
    location = storage or spec.storage
    Location.writable(location, "--storage" if storage else "storage.path")
    store = ResultStore(location)
    store.check()
    first = store.first_spec_text()
    if first is not None:
        try:
            old_name = tomllib.loads(first).get("name")
        except tomllib.TOMLDecodeError as exc:
            raise StoreError(f"{store.display(SPEC)} is not a sweep spec ({exc}); it was left "
                             f"untouched: move it aside, or give this sweep its own storage.") from None
        if not isinstance(old_name, str):
            raise StoreError(f"{store.display(SPEC)} is not a sweep spec (it names no sweep); it was "
                             f"left untouched: move it aside, or give this sweep its own storage.")
        if old_name != spec.name:
            raise SpecError(f"name = {spec.name!r} is invalid: the store {location} holds the sweep "
                            f"{old_name!r}; give this sweep its own storage.path or --storage.")
    from sweeps.plan import check_memory
    check_memory(spec)
    todo, again = select_trials(spec, store, rerun)
    return store, todo, again


def run_sweep(spec: SweepSpec, *, address: str | None = None, storage: str | None = None,
              max_concurrent: int | None = None, rerun: Iterable[str] = (), analyze: bool = True,
              out: TextIO | None = None, tracking: Tracking | None = None, verbose: bool = False,
              command: str | None = None, adaptive: bool = False) -> int:
    """Run what the store lacks. Returns 0 when every trial of the spec is in the store.
    `adaptive` (or an [adaptive] table in the spec) runs only the trials sweeps/adaptive.py chooses.
    `tracking` (default: the spec's) names the experiment trackers; `command` is what the user
    types to continue an unfinished sweep (default: `depthwidth sweep run` with these options)."""
    from sweeps.outcome import continue_command

    out = out or sys.stdout
    tracking = spec.tracking if tracking is None else tracking
    check_available(tracking)
    from sweeps.adaptive import parse_adaptive
    chooser = parse_adaptive(spec.text, spec.source_path, enable=adaptive)
    store, todo, again = prepare(spec, storage, rerun)
    command = command or continue_command(spec.source_path, storage, address, max_concurrent)
    n_done = len(spec.trials) - len(todo)
    if not todo:
        print(f"[{spec.name}] all {len(spec.trials)} trials are already in {store.location}; "
              f"nothing to run.", file=out)
        store.write_spec(spec.text, spec.source_path)
        if tracking.enabled:
            _catch_up(spec, store, tracking, out)
        _clear_finished(store)
        return _finish(store, analyze, out, 0)

    from sweeps import cluster
    started_ray = cluster.connect(address, verbose=verbose)
    try:
        nodes = cluster.alive_nodes()
        cluster.check_resources(spec.resources, nodes)
        _check_node_memory(spec, todo, nodes)
        plans = cluster.plan_on(spec, todo, nodes)  # GPU shares and memory asks per trial
        cluster.check_shared_storage(store, nodes)
        store.lock()
        store.write_spec(spec.text, spec.source_path)
        print(f"[{spec.name}] {len(todo)} trials to "
              f"{'run' if chooser is None else 'choose from, adaptively,'} ({n_done} already in the store), "
              f"{_describe(nodes)}; results in {store.location}", file=out, flush=True)
        code = _tune(spec, store, todo, again, max_concurrent, out, tracking, verbose, command,
                     plans, nodes, chooser)
    finally:
        store.close()  # folds the parts this run wrote into runs.parquet and curves.parquet
        stopping = cluster.stop(started_ray)
    try:
        return _finish(store, analyze, out, code)
    finally:
        stopping.join()


def _trackers(spec: SweepSpec, store: ResultStore, tracking: Tracking):
    """The sweep's trackers, first sent the spec's trials the store already holds (those a
    tracker lacks, e.g. after a driver was killed between storing a trial and sending it)."""
    from sweeps.export import build, send_stored, trial_info

    infos = {t.trial_id: trial_info(t, spec.name) for t in spec.trials}
    trackers = build(tracking, spec.name, store)
    send_stored(trackers, store, infos, only=infos)
    return trackers, infos


def _catch_up(spec: SweepSpec, store: ResultStore, tracking: Tracking, out: TextIO) -> None:
    trackers, _ = _trackers(spec, store, tracking)
    for message in trackers.close(FLUSH_TIMEOUT_S):
        print(message, file=out)


def _check_node_memory(spec: SweepSpec, todo: list, nodes: list[dict[str, Any]]) -> None:
    """CPU trials against the largest node: Ray's `memory` and `object_store_memory` resources
    together are what the node had free when Ray started on it."""
    from sweeps.plan import check_node_memory, trial_plan

    largest = max((n["Resources"].get("memory", 0) + n["Resources"].get("object_store_memory", 0)
                   for n in nodes), default=0)
    if largest > 0:
        check_node_memory(spec, [trial_plan(t, spec) for t in todo], largest,
                          "the largest Ray node had free when Ray started")


def _clear_finished(store: ResultStore) -> None:
    """Delete the checkpoints of every stored trial, including those a killed driver had
    recorded but not yet cleared."""
    from sweeps.resume import clear_checkpoints
    clear_checkpoints(store, store.finished_ids())


def _describe(nodes: list[dict[str, Any]]) -> str:
    cpus = sum(n["Resources"].get("CPU", 0) for n in nodes)
    gpus = sum(n["Resources"].get("GPU", 0) for n in nodes)
    return (f"Ray: {len(nodes)} node{'s' if len(nodes) != 1 else ''}, {cpus:g} CPUs"
            + (f", {gpus:g} GPUs" if gpus else ""))


def _tune(spec: SweepSpec, store: ResultStore, todo: list, again: set[str],
          max_concurrent: int | None, out: TextIO, tracking: Tracking, verbose: bool,
          command: str, plans: dict[str, dict[str, Any]], nodes: list[dict[str, Any]],
          chooser=None) -> int:
    from ray import tune

    from sweeps.cluster import concurrent_trials, trial_resources
    from sweeps.driver import StopOnStoreFailure, StoreWriter, TrackerFeed, TrialFeed
    from sweeps.outcome import paragraph
    from sweeps.plan import ray_resources
    from sweeps.progress import ProgressView, trial_cost
    from sweeps.resume import clear_checkpoints, find_checkpoints
    from sweeps.trainable import HOOK_ENV, run_trial

    _clear_finished(store)  # also a rerun's trials, which start from scratch
    resume = find_checkpoints(store, [t.trial_id for t in todo if t.trial_id not in again])
    r = spec.resources
    trials = [{"trial_id": t.trial_id, **t.config_dict(),
               "resume_uris": [uri for uri, _ in resume.get(t.trial_id, [])], **_asks(plans[t.trial_id])}
              for t in todo]
    labels = {t.trial_id: label(t) for t in todo}
    view = ProgressView(spec.name, {k: trial_cost(p["steps"], p["flops"]) for k, p in plans.items()},
                        labels, out)
    for tid, candidates in resume.items():
        view.note(f"trial {labels[tid]} resumes from its checkpoint at step {candidates[0][1]}")

    driver = StoreWriter(spec.name, store, view, labels)
    callbacks: list = [driver]
    trackers = None
    if tracking.enabled:
        trackers, infos = _trackers(spec, store, tracking)
        callbacks.append(TrackerFeed(trackers, infos, driver))
    _lighter_tune()
    exp = f"{spec.name}-{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}"
    hook = os.environ.get(HOOK_ENV, "")
    limit = max_concurrent if max_concurrent else (r.max_concurrent or concurrent_trials(
        [ray_resources(p) for p in plans.values()], r.workers, nodes))
    # Tune keeps every trial of a run in memory (~100 KB each, and rewrites them all at every
    # experiment checkpoint), so a sweep of thousands is several Tune runs in a row
    chunks = [trials[i:i + CHUNK_TRIALS] for i in range(0, len(trials), CHUNK_TRIALS)]
    feeds: list = []  # an adaptive sweep is one Tune run: its searcher makes trials as it chooses
    if chooser is not None:
        from sweeps.adaptive_search import AdaptiveSearch
        chunks = [trials]
    crash: BaseException | None = None
    interrupted = False
    for k, part in enumerate(chunks):
        name = exp if len(chunks) == 1 else f"{exp}-{k + 1}"
        run = {"cpus": r.cpus, "hook_dir": hook, "workers": r.workers, "sharding": r.sharding,
               "max_failures": r.max_failures, "store": store.location, "experiment": name,
               "cwd": os.getcwd()}
        configs = [{"trial": t, "run": run} for t in part]
        feeds.append(TrialFeed(configs) if chooser is None else
                     AdaptiveSearch(configs, spec, store, chooser, view.note))
        tuner = tune.Tuner(
            tune.with_resources(run_trial, trial_resources),  # each trial's own GPU share and memory
            tune_config=tune.TuneConfig(
                # one suggestion more for an adaptive sweep: the last refit says why it stops
                search_alg=feeds[-1], num_samples=len(part) + (chooser is not None),
                reuse_actors=True, max_concurrent_trials=limit,
                trial_name_creator=_trial_name, trial_dirname_creator=_trial_name),
            run_config=tune.RunConfig(
                name=name, storage_path=store.tune_storage, storage_filesystem=store.fs, verbose=0,
                callbacks=callbacks, stop=StopOnStoreFailure(driver),
                failure_config=tune.FailureConfig(max_failures=r.max_failures),
                checkpoint_config=tune.CheckpointConfig(num_to_keep=2)))
        with _quiet_tune(verbose):
            try:
                tuner.fit()  # Tune turns Ctrl-C into a graceful stop; the trials left are reported below
            except KeyboardInterrupt:
                interrupted = True
            except Exception as exc:  # an error inside Tune: told in the paragraph below
                crash = exc
        if interrupted or crash is not None or driver.failure is not None or any(
                t["trial_id"] not in driver.written and view.status.get(t["trial_id"]) != "error"
                for t in part):
            break  # stopped before the end: the later Tune runs do not start
    view.close()
    clear_checkpoints(store, driver.written)
    missing = [t for t in todo if t.trial_id not in driver.written
               and (chooser is None or t.trial_id in feeds[-1].chosen)]  # an adaptive sweep: its choices
    if trackers is not None:
        for t in missing:
            trackers.release(infos[t.trial_id])
        for message in trackers.close(FLUSH_TIMEOUT_S):
            print(message, file=out)
    if missing:
        errors = {labels[t]: view.errors.get(t, "") for t, s in view.status.items() if s == "error"}
        print(paragraph(spec.name, n_todo=len(todo), n_missing=len(missing),
                        n_stored=len(store.runs()), store=store.location, command=command,
                        store_failure=driver.failure, errors=errors, max_failures=r.max_failures,
                        crash=crash, interrupted=interrupted), file=out)
        return 1
    return 0


def _trial_name(trial) -> str:
    """Tune's name and folder for a trial: its trial_id. A function, not a lambda: Tune pickles
    it into the saved state of every trial, by reference here (60 bytes, not 1.2 KB)."""
    return trial.config["trial"]["trial_id"]


def _asks(plan: dict[str, Any]) -> dict[str, Any]:
    """What a trial carries beyond its configs: its Ray request per worker, its worker count
    (recorded in its row) and its work per step (for its torch thread count)."""
    from sweeps.plan import ray_resources
    return {"resources": ray_resources(plan), "workers": plan["workers"],
            "flops_per_step": plan["flops"] / max(1, plan["steps"])}


def _finish(store: ResultStore, analyze: bool, out: TextIO, code: int) -> int:
    runs = store.runs()
    if not runs.empty:
        counts = runs["status"].value_counts().to_dict()
        best = runs.loc[runs["status"] == "ok", "final_val_loss"]
        best_s = f", best val loss {best.min():.4f}" if len(best) and math.isfinite(best.min()) else ""
        print(f"store {store.location}: {len(runs)} trials "
              f"({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}){best_s}", file=out)
    if analyze and not runs.empty:
        _analyze(store, out)
    return code


def _analyze(store: ResultStore, out: TextIO) -> None:
    try:
        from analysis.report import analyze as run_analysis
    except ImportError:
        print(f"analysis is not available here; the results are in {store.location} "
              f"(runs.parquet, curves.parquet).", file=out)
        return
    try:
        result = run_analysis(store.location)
    except Exception as exc:  # the sweep's results stand even when a fit or figure fails
        print(f"analysis failed ({type(exc).__name__}: {exc}); the results are in {store.location}.",
              file=out)
        return
    if isinstance(result, dict) and result.get("report_dir"):
        where = Location(result["report_dir"]).display("report.md")
    else:
        where = store.display("analysis/report.md")
    print(f"report: {where}", file=out)
