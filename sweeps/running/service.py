"""Run, resume and extend a sweep on Ray Tune, embedded or on a cluster (docs/design.md "Execution").

Every run of the same spec runs only what the store lacks: finished trials are never rerun
(unless --rerun names them), unfinished ones resume from their last checkpoint, new grid points
run fresh. Trials are Ray Tune trials of one function trainable with reused actors; this driver
is the store's single writer, recording each trial the moment its final report arrives.
Ray and the analysis are imported inside the functions that use them: a sweep with nothing to
run, or one stopped by a bad spec, never loads Ray (~1 s), matplotlib or scipy.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import math
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TextIO

from depthwidth.clitools import project_folder
from runstore.files import StoreError, is_remote, local_path
from runstore.layout import SPEC, STATUSES
from runstore.location import Location
from runstore.store import ResultStore
from sweeps.backends import cluster, ray_compat
from sweeps.designing.adaptive import Adaptive, check_adaptive
from sweeps.plans.branches import groups
from sweeps.plans.halving import BOARD_PREFIX, HalvingPlan, grouped
from sweeps.plans.packing import Node
from sweeps.plans.plan import PlanRow, check_memory, check_node_memory, plan_rows
from sweeps.plans.spec import SpecError, SweepSpec, tomllib
from sweeps.plans.tracking import Tracking, check_available
from sweeps.plans.trialconfig import Branch, RayAsk, RunSettings, TrialConfig, depthwidth_environ
from sweeps.results.export import build, check_tracker_outputs, send_stored, trial_info, trial_label
from sweeps.results.feed import FLUSH_TIMEOUT_S
from sweeps.running.carry import carry, read_table
from sweeps.running.halving_board import start_board
from sweeps.running.outcome import continue_command, paragraph
from sweeps.running.progress import ProgressView, trial_cost
from sweeps.running.resume import clear_checkpoints, find_checkpoints

# Tune's own loggers (CSV/JSON/TensorBoard per trial) and its table are off: the store and the
# progress view replace them, and they cost ~0.3 s per trial on 2 CPUs.
_QUIET_ENV = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "RAY_AIR_NEW_OUTPUT": "0",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
}
CHUNK_TRIALS = 1000  # trials per Tune run (see _fit_in_chunks)
_QUIET_LOGGERS = ("ray.tune.analysis.experiment_analysis", "ray.tune.tune", "ray.tune.impl.tuner_internal")
# Without --verbose, trial errors reach the user as the closing paragraph, not as Tune's tracebacks.
_SILENT_LOGGERS = ("ray.tune", "ray.train", "ray.air")


@dataclass(frozen=True)
class SweepOptions:
    """How the user asked for one `sweep run`, as sweeps/cli.py builds it from the command line.
    `address`: the Ray cluster (default: RAY_ADDRESS, else an embedded Ray); `storage`: the store
    (default: the spec's storage.path); `rerun`: trial ids or a status to run again from scratch;
    `tracking`: the experiment trackers (default: the spec's); `command`: what the user types to
    continue an unfinished sweep (default: `depthwidth sweep run` with these options); `adaptive`
    (or an [adaptive] table in the spec): run only the trials sweeps/designing/adaptive.py chooses;
    `carry_from`: a runs table (`sweep results --csv`) whose finished trials are taken first;
    `force`: use a storage folder that is a project's own folder (pyproject.toml or .git)."""

    address: str | None = None
    storage: str | None = None
    max_concurrent: int | None = None
    rerun: tuple[str, ...] = ()
    analyze: bool = True
    tracking: Tracking | None = None
    verbose: bool = False
    command: str | None = None
    adaptive: bool = False
    carry_from: str | None = None
    force: bool = False


def run_sweep(spec: SweepSpec, opts: SweepOptions = SweepOptions(), out: TextIO | None = None) -> int:
    """Run what the store lacks. Returns 0 when every trial of the spec is in the store.

    The steps, each below in this order: check everything that needs no cluster (`prepare`);
    start or join Ray and check the cluster against the trials (`_plan_on_cluster`); run the
    trials on Tune, the driver storing each as it finishes (`_tune`); fold the store, stop Ray,
    print the summary and analyse (`_finish`)."""
    tracking = spec.tracking if opts.tracking is None else opts.tracking
    check_available(tracking)
    chooser = spec.adaptive  # the [adaptive] table, checked when the spec was read
    if chooser is None and opts.adaptive:
        check_adaptive(spec.trials, spec.source_path)
        chooser = Adaptive()
    if chooser is not None and spec.halving:
        raise SpecError(
            f"--adaptive is invalid for {spec.source_path}: its [halving] runs every setting of a "
            f"group, while an adaptive sweep chooses its own trials; use one of them."
        )
    location = opts.storage or spec.storage
    check_tracker_outputs(tracking, None if is_remote(location) else local_path(location))
    store, todo, again, plans = prepare(spec, opts.storage, opts.rerun, opts.carry_from, out, opts.force)
    command = opts.command or continue_command(
        spec.source_path, opts.storage, opts.address, opts.max_concurrent
    )
    run = SweepRun(spec, store, out or sys.stdout, replace(opts, tracking=tracking, command=command), chooser)
    if not todo:
        return _nothing_to_run(run)
    started_ray = cluster.connect(opts.address, verbose=opts.verbose)
    try:
        plans, nodes = _plan_on_cluster(run, todo, plans)
        code = _tune(run, todo, again, plans, nodes)
    finally:
        store.close()  # folds the parts this run wrote into runs.parquet and curves.parquet
        stopping = cluster.stop(started_ray)
    try:
        return _finish(store, opts.analyze, run.out, code)
    finally:
        stopping.join()


@dataclass
class SweepRun:
    """One `sweep run`: the spec, its store, where it prints, and how the user asked for it (its
    tracking and continue command filled in)."""

    spec: SweepSpec
    store: ResultStore
    out: TextIO
    opts: SweepOptions
    chooser: Any = None  # an adaptive sweep's settings (sweeps/designing/adaptive.py), else None
    board: str | None = None  # the successive halving's board actor (sweeps/plans/halving.py), else None


def prepare(
    spec: SweepSpec,
    storage: str | None,
    rerun: Iterable[str] = (),
    carry_from: str | None = None,
    out: TextIO | None = None,
    force: bool = False,
) -> Prepared:
    """Every check that needs no cluster; raises SpecError/StoreError before anything is written.
    `carry_from`: a runs table whose finished trials of this sweep the store takes first
    (sweeps/running/carry.py). Each trial still to do is planned here, once (PlanRow)."""
    table = read_table(carry_from) if carry_from else None
    location = storage or spec.storage
    where = "--storage" if storage else f"{spec.source_path}: storage.path"
    if not force and (mark := project_folder(location)):
        raise SpecError(
            f"{where} = {location!r} is invalid: it is a project's own folder (it holds {mark}), "
            f"and the store and its report would land in its source tree; give the sweep a "
            f"folder of its own, or --force to use this one."
        )
    Location.writable(location, "--storage" if storage else "storage.path")
    store = ResultStore(location)
    store.check()
    first = store.first_spec_text()
    if first is not None:
        try:
            old_name = tomllib.loads(first).get("name")
        except tomllib.TOMLDecodeError as exc:
            raise StoreError(
                f"{store.display(SPEC)} is not a sweep spec ({exc}); it was left "
                f"untouched: move it aside, or give this sweep its own storage."
            ) from None
        if not isinstance(old_name, str):
            raise StoreError(
                f"{store.display(SPEC)} is not a sweep spec (it names no sweep); it was "
                f"left untouched: move it aside, or give this sweep its own storage."
            )
        if old_name != spec.name:
            raise SpecError(
                f"name = {spec.name!r} is invalid: the store {location} holds the sweep "
                f"{old_name!r}; give this sweep its own storage.path or --storage."
            )
    rows = plan_rows(spec, finished=store.finished_ids())
    check_memory(spec, rows)  # before anything is written, --from's rows included
    if table is not None and carry(store, spec, table, carry_from, out or sys.stdout):
        spec = spec.adopt(set(store.runs()["trial_id"]))  # a carried row may hold an older id
        rows = plan_rows(spec, finished=store.finished_ids())  # its runs' budgets are no branches
    todo, again = select_trials(spec, store, rerun)
    if again:  # run from scratch: their budgets are branches of their runs again
        rows = plan_rows(spec, finished=store.finished_ids() - again)
    return Prepared(store, todo, again, {r.trial_id: r for r in rows})


class Prepared(NamedTuple):
    """What `prepare` found: the store, the trials to run, those to run again from scratch, and
    each trial's PlanRow."""

    store: ResultStore
    todo: list
    again: set[str]
    plans: dict[str, PlanRow]


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
            raise SpecError(
                f"--rerun = {item!r} is invalid: it is neither a trial_id of this sweep "
                f"nor one of all, {', '.join(STATUSES)}."
            )
    todo = [t for t in spec.trials if t.trial_id not in finished or t.trial_id in again]
    return todo, again


def _nothing_to_run(run: SweepRun) -> int:
    spec, store = run.spec, run.store
    print(
        f"[{spec.name}] all {len(spec.trials)} trials are already in {store.location}; nothing to run.",
        file=run.out,
    )
    store.write_spec(spec.text, spec.source_path)
    if run.opts.tracking.enabled:
        _catch_up(spec, store, run.opts.tracking, run.out)
    _clear_finished(store)
    return _finish(store, run.opts.analyze, run.out, 0)


def _plan_on_cluster(
    run: SweepRun, todo: list, plans: dict[str, PlanRow]
) -> tuple[dict[str, PlanRow], list[dict[str, Any]]]:
    """Every check against the Ray nodes (resources, memory, GPU shares, shared storage), then
    the store is locked and its spec written: (each trial's PlanRow, the nodes). A trial is
    planned again only where the cluster's GPUs hold another amount of memory than the spec
    assumed (resources.gpu_memory_gb)."""
    spec, store = run.spec, run.store
    nodes = cluster.alive_nodes()
    cluster.check_resources(spec.resources, nodes)
    mine = [plans[t.trial_id] for t in todo]
    _check_node_memory(spec, mine, nodes)
    finished = store.finished_ids() - {t.trial_id for t in todo}
    # GPU shares and memory asks per trial, checked against the nodes
    plans = cluster.plan_on(spec, todo, nodes, finished, mine)
    cluster.check_shared_storage(store, nodes)
    store.lock()
    store.write_spec(spec.text, spec.source_path)
    verb = "run" if run.chooser is None else "choose from, adaptively,"
    print(
        f"[{spec.name}] {len(todo)} trials to {verb} ({len(spec.trials) - len(todo)} already in "
        f"the store), {_describe(nodes)}; results in {store.location}",
        file=run.out,
        flush=True,
    )
    return plans, nodes


def _check_node_memory(spec: SweepSpec, rows: list[PlanRow], nodes: list[Node]) -> None:
    """CPU trials against the largest node: Ray's `memory` and `object_store_memory` resources
    together are what the node had free when Ray started on it."""
    largest = max((n.offers("memory") + n.offers("object_store_memory") for n in nodes), default=0)
    if largest > 0:
        check_node_memory(
            spec,
            rows,
            largest,
            "the largest Ray node had free when Ray started",
        )


def _tune(run: SweepRun, todo: list, again: set[str], plans: dict[str, PlanRow], nodes: list[Node]) -> int:
    """The trials still to do, on Ray Tune; 0 when all of them are stored, else 1 after the
    paragraph that says why not (sweeps/running/outcome.py)."""
    from sweeps.running.driver import StoreWriter, TrackerFeed  # lazy: imports Ray

    _clear_finished(run.store)  # also a rerun's trials, which start from scratch
    halving = run.spec.halving
    if halving:  # each group's members side by side, and the board that decides its rungs
        todo = grouped(todo, halving)
        run.board = f"{BOARD_PREFIX}{run.spec.name}-{os.getpid()}"
        board = start_board(run.board, todo, halving, run.store)  # noqa: F841 (kept alive while Tune runs)
    trials, resume = _trial_configs(run.store, todo, again, plans, halving, run.spec.branched_from)
    feed = _Feed(run, todo, plans, resume)
    ray_compat.lighter_tune((StoreWriter, TrackerFeed))
    limit = (
        run.opts.max_concurrent
        or run.spec.resources.max_concurrent
        or _concurrent_limit(run.spec, plans, nodes)
    )
    ended = _fit_in_chunks(run, trials, feed, limit)
    feed.view.close()
    clear_checkpoints(run.store, feed.driver.written)
    missing = [
        t
        for t in todo
        if t.trial_id not in feed.driver.written  # adaptive: its choices only
        and (feed.searcher is None or t.trial_id in feed.searcher.chosen)
    ]
    feed.close_trackers(missing)
    if not missing:
        return 0
    r, view = run.spec.resources, feed.view
    errors = {feed.labels[t]: view.errors.get(t, "") for t, s in view.status.items() if s == "error"}
    print(
        paragraph(
            run.spec.name,
            n_todo=len(todo),
            n_missing=len(missing),
            n_stored=len(run.store.runs()),
            store=run.store.location,
            command=run.opts.command,
            store_failure=feed.driver.failure,
            errors=errors,
            max_failures=r.max_failures,
            crash=ended.crash,
            interrupted=ended.interrupted,
        ),
        file=run.out,
    )
    return 1


def _trial_configs(
    store: ResultStore,
    todo: list,
    again: set[str],
    plans: dict[str, PlanRow],
    halving: Mapping[str, HalvingPlan] | None = None,
    branched_from: Mapping[str, str] | None = None,
) -> tuple[list[TrialConfig], dict[str, list]]:
    """Each trial's config as its Tune function reads it, with the checkpoints in the store it
    may resume from (furthest first); a trial to rerun gets none. Where the spec has cooldown
    branches (`branched_from`, budget.from_one_run) the budgets still to do of one run are one
    Tune trial: the longest, carrying the shorter ones as its branches (sweeps/plans/branches.py)."""
    shares: dict[str, list] = {t.trial_id: [] for t in todo}
    if branched_from:  # one Tune trial per run: the longest budget still to do, and its branches
        shares = {run.trial_id: branches for run, branches in groups(todo)}
    runs = [t for t in todo if t.trial_id in shares]
    resume = find_checkpoints(store, [t.trial_id for t in runs if t.trial_id not in again])
    trials = [
        TrialConfig.of(
            t,
            resume_uris=tuple(uri for uri, _ in resume.get(t.trial_id, [])),
            **_asks(plans[t.trial_id]),
            halving=halving[t.trial_id] if halving else None,
            branches=tuple(Branch(b.trial_id, b.train) for b in shares[t.trial_id]),
        )
        for t in runs
    ]
    return trials, resume


@dataclass
class _Feed:
    """Where the trials' reports go: the progress view, the store's writer and the trackers."""

    run: SweepRun
    todo: list
    plans: dict[str, PlanRow]
    resume: dict[str, list]
    callbacks: list = field(default_factory=list)
    searcher: Any = None  # an adaptive sweep's AdaptiveSearch, once its Tune run is built

    def __post_init__(self) -> None:
        from sweeps.running.driver import StoreWriter, TrackerFeed  # lazy: imports Ray

        run = self.run
        self.labels = {t.trial_id: trial_label(t) for t in self.todo}
        self.view = ProgressView(
            run.spec.name,
            {k: trial_cost(p.steps, p.flops) for k, p in self.plans.items()},
            self.labels,
            run.out,
        )
        for tid, candidates in self.resume.items():
            self.view.note(f"trial {self.labels[tid]} resumes from its checkpoint at step {candidates[0][1]}")
        self.driver = StoreWriter(run.spec.name, run.store, self.view, self.labels)
        self.callbacks = [self.driver]
        self.trackers = None
        if run.opts.tracking.enabled:
            self.trackers, self.infos = _trackers(run.spec, run.store, run.opts.tracking)
            self.callbacks.append(TrackerFeed(self.trackers, self.infos, self.driver))

    def unfinished(self, part: list[TrialConfig]) -> bool:
        """Whether a trial of this Tune run is neither stored nor failed."""
        return any(
            t.trial_id not in self.driver.written and self.view.status.get(t.trial_id) != "error"
            for t in part
        )

    def close_trackers(self, missing: list) -> None:
        if self.trackers is None:
            return
        for t in missing:
            self.trackers.release(self.infos[t.trial_id])
        for message in self.trackers.close(FLUSH_TIMEOUT_S):
            print(message, file=self.run.out)


def _concurrent_limit(spec: SweepSpec, plans: dict[str, PlanRow], nodes: list[Node]) -> int | None:
    return cluster.concurrent_trials(
        [p.ray_resources() for p in plans.values()], spec.resources.workers, nodes
    )


@dataclass(frozen=True)
class Ended:
    """How a Tune run ended early, if it did: an error inside Tune, or the user's Ctrl-C."""

    crash: Exception | None = None
    interrupted: bool = False

    @property
    def early(self) -> bool:
        return self.crash is not None or self.interrupted


def _fit_in_chunks(run: SweepRun, trials: list[TrialConfig], feed: _Feed, limit: int | None) -> Ended:
    """Tune keeps every trial of a run in memory (~100 KB each, and rewrites them all at every
    experiment checkpoint), so a sweep of thousands is several Tune runs in a row, the next
    started only when the last ended with each of its trials stored or failed. Returns how the
    last one ended."""
    r = run.spec.resources
    exp = f"{run.spec.name}-{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}"
    chunks = [trials[i : i + CHUNK_TRIALS] for i in range(0, len(trials), CHUNK_TRIALS)]
    if run.chooser is not None:  # an adaptive sweep is one Tune run: its searcher makes trials as it chooses
        chunks = [trials]
    ended = Ended()
    for k, part in enumerate(chunks):
        name = exp if len(chunks) == 1 else f"{exp}-{k + 1}"
        settings = RunSettings(
            cpus=r.cpus,
            workers=r.workers,
            sharding=r.sharding,
            max_failures=r.max_failures,
            store=run.store.location,
            experiment=name,
            cwd=os.getcwd(),
            halving_board=run.board,
            environ=depthwidth_environ(),
        )
        tuner = _tuner(run, [replace(t, run=settings).to_dict() for t in part], name, feed, limit)
        with _quiet_tune(run.opts.verbose):
            try:
                tuner.fit()  # Tune turns Ctrl-C into a graceful stop; the trials left are reported
            except KeyboardInterrupt:
                ended = Ended(interrupted=True)
            except Exception as exc:  # an error inside Tune: told in the closing paragraph
                ended = Ended(crash=exc)
        if ended.early or feed.driver.failure is not None or feed.unfinished(part):
            break  # stopped before the end: the later Tune runs do not start
    return ended


def _tuner(run: SweepRun, configs: list[dict[str, Any]], name: str, feed: _Feed, limit: int | None):
    """One Tune run of these trials: each trial's own resources, handed over one at a time,
    reused actors, checkpoints in the store's tune/ folder."""
    from ray import tune  # lazy, here and below: these import Ray

    from sweeps.running.driver import StopOnStoreFailure, TrialFeed
    from sweeps.running.trainable import run_trial

    r, store = run.spec.resources, run.store
    if run.chooser is None:
        search, samples = TrialFeed(configs), len(configs)
    else:  # one suggestion more: the last refit says why the adaptive sweep stops
        from sweeps.designing.adaptive_search import AdaptiveSearch

        search = feed.searcher = AdaptiveSearch(configs, run.spec, store, run.chooser, feed.view.note)
        samples = len(configs) + 1
    if r.workers > 1:  # N data-parallel workers per trial, through Ray Train
        from sweeps.running.distributed import run_workers as trainable
    else:
        trainable = run_trial
    return tune.Tuner(
        tune.with_resources(trainable, cluster.trial_resources),  # each trial's own GPU share and memory
        tune_config=tune.TuneConfig(
            search_alg=search,
            num_samples=samples,
            reuse_actors=True,
            max_concurrent_trials=limit,
            trial_name_creator=_trial_name,
            trial_dirname_creator=_trial_name,
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=store.tune_storage,
            storage_filesystem=store.fs,
            verbose=0,
            callbacks=feed.callbacks,
            stop=StopOnStoreFailure(feed.driver),
            failure_config=tune.FailureConfig(max_failures=r.max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        ),
    )


def _trial_name(trial) -> str:
    """Tune's name and folder for a trial: its trial_id. A function, not a lambda: Tune pickles
    it into the saved state of every trial, by reference here (60 bytes, not 1.2 KB)."""
    return TrialConfig.id_of(trial.config)


def _asks(plan: PlanRow) -> dict[str, Any]:
    """What a trial carries beyond its configs: its Ray request per worker, its worker count
    (recorded in its row) and its work per step (for its torch thread count)."""
    return {
        "resources": RayAsk.from_dict(plan.ray_resources()),
        "workers": plan.workers,
        "flops_per_step": plan.flops / max(1, plan.steps),
    }


def _finish(store: ResultStore, analyze: bool, out: TextIO, code: int) -> int:
    runs = store.runs()
    if not runs.empty:
        counts = runs["status"].value_counts().to_dict()
        best = runs.loc[runs["status"] == "ok", "final_val_loss"]
        best_s = f", best val loss {best.min():.4f}" if len(best) and math.isfinite(best.min()) else ""
        print(
            f"store {store.location}: {len(runs)} trials "
            f"({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}){best_s}",
            file=out,
        )
    if analyze and not runs.empty:
        _analyze(store, out)
    return code


def _analyze(store: ResultStore, out: TextIO) -> None:
    # lazy: the analysis (a package of depthwidth's own, installed with it) loads matplotlib and
    # scipy, which a sweep run with --no-analyze need not wait for
    from analysis.reporting.markdown import verdict_line
    from analysis.reporting.report import analyze as run_analysis

    try:
        result = run_analysis(store.location)
    except Exception as exc:  # the sweep's results stand even when a fit or figure fails
        print(
            f"analysis failed ({type(exc).__name__}: {exc}); the results are in {store.location}.", file=out
        )
        return
    if isinstance(result, dict) and result.get("report_dir"):
        where = Location(result["report_dir"]).display("report.html")
    else:
        where = store.display("analysis/report.html")
    # the answer first (analysis/reporting/answer.py), then the verdict on a line of its own; the
    # last line short, naming the page to open (report.md, its text, and the figures beside it)
    if result.get("answer"):
        print(result["answer"], file=out)
    print(verdict_line(result), file=out)
    print(f"report: {where}", file=out)


def _trackers(spec: SweepSpec, store: ResultStore, tracking: Tracking):
    """The sweep's trackers, first sent the spec's trials the store already holds (those a
    tracker lacks, e.g. after a driver was killed between storing a trial and sending it)."""
    infos = {t.trial_id: trial_info(t, spec.name) for t in spec.trials}
    trackers = build(tracking, spec.name, store)
    send_stored(trackers, store, infos, only=infos)
    return trackers, infos


def _catch_up(spec: SweepSpec, store: ResultStore, tracking: Tracking, out: TextIO) -> None:
    trackers, _ = _trackers(spec, store, tracking)
    for message in trackers.close(FLUSH_TIMEOUT_S):
        print(message, file=out)


def _clear_finished(store: ResultStore) -> None:
    """Delete the checkpoints of every stored trial, including those a killed driver had
    recorded but not yet cleared."""
    clear_checkpoints(store, store.finished_ids())


def _describe(nodes: list[Node]) -> str:
    cpus = sum(n.offers("CPU") for n in nodes)
    gpus = sum(n.offers("GPU") for n in nodes)
    return f"Ray: {len(nodes)} node{'s' if len(nodes) != 1 else ''}, {cpus:g} CPUs" + (
        f", {gpus:g} GPUs" if gpus else ""
    )


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
