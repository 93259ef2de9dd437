"""`depthwidth sweep run | submit | status | logs | results | plan`: the sweep service's commands.

Thin: parse, validate the spec, call sweeps.running.service / sweeps.backends.cluster. The spec,
the store, the service and Ray load pyarrow, pandas or Ray, so they are imported only inside the handlers that
need them, and `depthwidth --help` stays fast (tests/test_sweep_spec.py checks that importing this
module loads neither Ray nor torch). Bad input: one sentence on stderr
naming the field and value, exit code 2, nothing written or submitted.
`python -m sweeps.cli run SPEC` is the same as `depthwidth sweep run SPEC` (Ray Jobs use it).
"""

from __future__ import annotations

import argparse
import sys

from depthwidth.clitools import EXIT_BAD_INPUT, OutputError
from depthwidth.clitools import fail as _fail
from sweeps.plans.errors import SpecError
from sweeps.results.export import add_tracker_flags
from sweeps.running.outcome import continue_command
from sweeps.slurm import add_commands as add_slurm_commands


def _errors():
    # lazy: the store's and the cluster's modules load pyarrow and pandas
    from depthwidth.config import ConfigError
    from runstore.files import StoreError
    from sweeps.backends.cluster import ClusterError

    return (SpecError, StoreError, ClusterError, ConfigError, OutputError)


def _check_max_concurrent(args: argparse.Namespace) -> None:
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise SpecError(f"--max-concurrent = {args.max_concurrent} is invalid: it must be at least 1.")


def _check_storage(args: argparse.Namespace) -> None:
    """`--storage ''` (an unset shell variable, say) must not fall back to the spec's path."""
    if args.storage is not None and not args.storage.strip():
        raise SpecError(
            f"--storage = {args.storage!r} is invalid: it must name a folder or a URI "
            f"(leave the flag out to use the spec's storage.path)."
        )


def _adopt(spec, storage: str | None):
    """The spec with the ids the store already holds for its trials (a store written before data
    paths were resolved knows them by their older ids, sweeps/plans/datapath.py)."""
    if not any(t.aliases for t in spec.trials):
        return spec
    from runstore.store import ResultStore  # lazy, as in every handler: pandas and pyarrow

    store = ResultStore(storage or spec.storage)
    return spec.adopt(store.finished_ids()) if store.has_runs() else spec


def _tracker_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """The tracker flags as given, for the command that continues an unfinished sweep."""
    out: list[str] = []
    for flag in ("mlflow", "wandb", "wandb_mode", "wandb_entity", "tensorboard"):
        v = getattr(args, flag, None)
        if v:
            out += [f"--{flag.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return tuple(out)


def cmd_run(args: argparse.Namespace) -> int:
    try:
        from sweeps.plans.spec import load_spec
        from sweeps.running.service import SweepOptions, run_sweep

        _check_max_concurrent(args)
        _check_storage(args)
        spec = _adopt(load_spec(args.spec), args.storage)
        tracking = spec.tracking.with_flags(
            mlflow=args.mlflow,
            wandb=args.wandb,
            wandb_mode=args.wandb_mode,
            tensorboard=args.tensorboard,
            wandb_entity=args.wandb_entity,
        )
        command = continue_command(
            args.spec,
            args.storage,
            args.address,
            args.max_concurrent,
            _tracker_flags(args) + (("--adaptive",) if args.adaptive else ()),
        )
        opts = SweepOptions(
            address=args.address,
            storage=args.storage,
            max_concurrent=args.max_concurrent,
            rerun=tuple(args.rerun or ()),
            analyze=not args.no_analyze,
            tracking=tracking,
            verbose=args.verbose,
            command=command,
            adaptive=args.adaptive,
            carry_from=args.carry_from,
            force=args.force,
        )
        return run_sweep(spec, opts)
    except _errors() as exc:
        return _fail(str(exc))


def cmd_submit(args: argparse.Namespace) -> int:
    try:
        from runstore.files import is_remote
        from sweeps.backends.cluster import submit
        from sweeps.plans.plan import check_memory
        from sweeps.plans.spec import load_spec
        from sweeps.running.service import prepare

        _check_max_concurrent(args)
        _check_storage(args)
        spec = _adopt(load_spec(args.spec), args.storage)
        if is_remote(args.storage or spec.storage):
            check_memory(spec)  # the cluster may hold credentials for the store that we lack
        else:  # a path is the cluster's shared folder, mounted here too (docs/cluster.md)
            prepare(spec, args.storage, args.rerun or (), force=args.force)  # checks only
        flags = (
            (["--no-analyze"] if args.no_analyze else [])
            + (["--force"] if args.force else [])
            + (["--max-concurrent", str(args.max_concurrent)] if args.max_concurrent else [])
            + [a for r in (args.rerun or ()) for a in ("--rerun", r)]
        )
        job_id, location = submit(spec, args.address, args.storage, flags)
    except _errors() as exc:
        return _fail(str(exc))
    print(f"submitted sweep {spec.name!r} as job {job_id}; results go to {location}")
    print(f"follow it with: depthwidth sweep status {job_id}  |  depthwidth sweep logs {job_id} --follow")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    try:
        from sweeps.backends.cluster import job_status

        status, message = job_status(args.address, args.job)
    except _errors() as exc:
        return _fail(str(exc))
    print(f"{args.job}: {status}" + (f" ({message})" if message else ""))
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    try:
        from sweeps.backends.cluster import job_logs

        text = job_logs(args.address, args.job, follow=args.follow)
    except _errors() as exc:
        return _fail(str(exc))
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    try:
        from depthwidth.clitools import check_output_file
        from runstore.files import StoreError
        from runstore.layout import RUNS
        from runstore.store import ResultStore, runs_table_text

        if args.csv is not None and args.csv != "-":  # an empty --csv is refused
            check_output_file(args.csv, "--csv", force=args.force)
        store = ResultStore(args.store)
        if not store.has_runs():
            raise StoreError(f"store = {args.store!r} is invalid: it holds no {RUNS}.")
        runs = store.runs()
    except _errors() as exc:
        return _fail(str(exc))
    if args.csv:
        if args.csv == "-":
            runs.to_csv(sys.stdout, index=False)
        else:
            from runstore.files import atomic_file

            with atomic_file(args.csv, "w") as f:
                runs.to_csv(f, index=False)
            print(f"wrote {len(runs)} runs to {args.csv}")
        return 0
    runs, tuning = _tuning_columns(runs)
    print(f"store {store.location}: {len(runs)} runs")
    print(runs_table_text(runs, tuning))
    return 0


def _tuning_columns(runs):
    """The runs with each tuning field (depthwidth.config.TUNING_FIELDS) that takes several values
    in the store as a column (read from the stored configs where the store has no column for it),
    and those fields: the settings that tell apart the runs of one shape."""
    from analysis.laws.tuning import MODEL_TUNABLE, TRAIN_TUNABLE, with_config_fields

    runs = with_config_fields(runs)
    varying = tuple(
        c for c in TRAIN_TUNABLE + MODEL_TUNABLE if c in runs.columns and runs[c].nunique(dropna=True) > 1
    )
    return runs, varying


def store_line(given: str, source: str, store, has_runs: bool) -> str:
    """Where a command's store is, said plainly: its absolute path (a URI as given), where a
    relative path was read from, and whether the store is there yet. `given` is the path as
    written, `source` what gave it (`--storage`, or the spec's storage.path)."""
    import os

    from runstore.files import is_remote

    where = f"store {store.location}"
    if not is_remote(given) and not os.path.isabs(os.path.expanduser(given)):
        where += f" ({source} {given!r}, from the folder this command runs in)"
    if has_runs:
        return where + ": it holds finished trials (counted below)"
    if store.is_local and os.path.isdir(store.root):
        return where + ": the folder is there, with no finished trial yet"
    return where + ": not there yet; `depthwidth sweep run` makes it"


def cmd_plan(args: argparse.Namespace) -> int:
    try:
        from runstore.store import ResultStore
        from sweeps.plans.plan import plan_json, plan_text
        from sweeps.plans.spec import load_spec

        _check_storage(args)
        spec = load_spec(args.spec, allow_missing_data=True)
        store = ResultStore(args.storage or spec.storage)
        has_runs = store.has_runs()
        finished = store.finished_ids() if has_runs else None
        spec = spec.adopt(finished) if finished else spec
        if args.json:
            print(plan_json(spec, finished))
        else:
            source = "--storage" if args.storage else "the spec's storage.path"
            where = store_line(args.storage or spec.storage, source, store, has_runs)
            print(plan_text(spec, finished, where))
    except _errors() as exc:
        return _fail(str(exc))
    return 0


def cmd_specs(args: argparse.Namespace) -> int:
    from sweeps.plans.bundled import bundled_specs
    from sweeps.plans.speccosts import read_index, spec_line

    specs, index = bundled_specs(), read_index()
    print(f"{len(specs)} bundled specs (run one by name, e.g. `depthwidth sweep plan smoke`):")
    for name, path in specs.items():
        print(spec_line(name, path, index), flush=True)
    return 0


def _add_force(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="use a storage folder that is a project's own folder (it holds pyproject.toml or .git)",
    )


def add_commands(sub: argparse._SubParsersAction) -> None:
    def common(p: argparse.ArgumentParser, storage: bool = True) -> None:
        p.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else embedded Ray)")
        if storage:
            p.add_argument("--storage", help="store location: a path or a pyarrow URI (overrides the spec)")

    p = sub.add_parser(
        "run",
        help="run (or resume, or extend) a sweep, then analyze it",
        description="Run every trial of SPEC that the store lacks on Ray Tune; "
        "finished trials are never rerun, interrupted ones resume.",
    )
    p.add_argument("spec", help="sweep spec (TOML), or the name of a bundled one (sweep specs)")
    common(p)
    p.add_argument("--max-concurrent", type=int, help="at most N trials at once")
    p.add_argument("--no-analyze", action="store_true", help="skip the analysis at the end")
    p.add_argument(
        "--rerun",
        action="append",
        metavar="ID|STATUS",
        help="rerun a stored trial from scratch: its trial_id, or all/ok/diverged/failed/stopped",
    )
    p.add_argument(
        "--verbose", action="store_true", help="also show Ray's own start-up notices and Tune's logs"
    )
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="run only the trials that most narrow the threshold base b, round by round, "
        "until its interval is narrow enough or the budget is spent (the spec's "
        "[adaptive] table, or its defaults)",
    )
    p.add_argument(
        "--from",
        dest="carry_from",
        metavar="TABLE",
        help="first take this sweep's finished trials from a runs table (.csv or .parquet, as "
        "`sweep results STORE --csv` writes it) that the store lacks, e.g. after a move to "
        "another machine; only the rest run",
    )
    _add_force(p)
    add_tracker_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "submit",
        help="send a sweep to a cluster as a Ray Job",
        description="Submit `sweep run SPEC` through the Ray Jobs API (address: the "
        "dashboard, e.g. http://HEAD:8265); prints the job id.",
    )
    p.add_argument("spec")
    common(p)
    p.add_argument("--max-concurrent", type=int)
    p.add_argument("--no-analyze", action="store_true")
    p.add_argument("--rerun", action="append", metavar="ID|STATUS")
    _add_force(p)
    p.set_defaults(func=cmd_submit)

    for name, helptext, func in (
        ("status", "a submitted sweep's job status", cmd_status),
        ("logs", "a submitted sweep's job logs", cmd_logs),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("job", help="job id printed by `sweep submit`")
        common(p, storage=False)
        if name == "logs":
            p.add_argument("--follow", action="store_true", help="stream until the job ends")
        p.set_defaults(func=func)

    p = sub.add_parser("results", help="print a store's runs table (or export it as CSV)")
    p.add_argument("store", help="store folder or URI, e.g. results/smoke")
    p.add_argument("--csv", metavar="FILE", help="write every column as CSV ('-' for stdout)")
    p.add_argument("--force", action="store_true", help="replace an existing --csv file")
    p.set_defaults(func=cmd_results)

    p = sub.add_parser("plan", help="the expanded trial table and estimated cost; runs nothing")
    p.add_argument("spec", help="sweep spec (TOML), or the name of a bundled one (sweep specs)")
    p.add_argument("--storage", help="mark trials already in this store (default: the spec's)")
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per trial and line (size, memory, GPU share, Ray resources)",
    )
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser(
        "specs",
        help="list the bundled sweep specs, what each is for and its planned cost",
        description="The sweep specs that ship with depthwidth: each runs by name from any "
        "folder (a local file of the same name wins).",
    )
    p.set_defaults(func=cmd_specs)

    add_slurm_commands(sub)  # `slurm` and `slurm-status`


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `sweep` and its subcommands to the `depthwidth` parser."""
    p = subparsers.add_parser(
        "sweep",
        help="run depth x width sweeps on Ray Tune",
        description="Sweeps of depth x width on Ray Tune: run, submit, status, logs, results, plan, specs.",
    )
    sub = p.add_subparsers(dest="sweep_command", metavar="SUBCOMMAND")
    add_commands(sub)

    def usage(args: argparse.Namespace) -> int:
        p.print_help(sys.stderr)
        return EXIT_BAD_INPUT

    p.set_defaults(func=usage)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="depthwidth sweep", description="depth x width sweeps on Ray Tune")
    sub = parser.add_subparsers(dest="sweep_command", metavar="SUBCOMMAND")
    add_commands(sub)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
