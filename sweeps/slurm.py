"""`depthwidth sweep slurm | slurm-status`: a sweep as a SLURM batch job, and that job's state
beside the sweep's progress. The batch script (written into the store) starts Ray across the
allocation, runs `sweep run` against it and resumes from the store when SLURM requeues it;
docs/cluster.md "SLURM" explains each part. Only the single-node path runs in the tests.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from sweeps.plans.errors import SpecError

SCRIPT_FOLDER = "slurm"  # inside the store: the script, the job ids, SLURM's and Ray's logs
JOBS_FILE = "jobs.txt"
PORT_LOW, PORT_BLOCK, PORT_SLOTS = 20000, 200, 225  # ports 20000-64999, 200 per job
MAX_TEMP_LEN = 40  # Ray adds ~62 characters below its temp dir; Unix sockets allow 107
DEFAULT_GRACE_S = 120
# Filesystems that live on one node: a store there is invisible to the other nodes of a job
LOCAL_FS = {
    "ext2",
    "ext3",
    "ext4",
    "xfs",
    "btrfs",
    "tmpfs",
    "ramfs",
    "overlay",
    "zfs",
    "f2fs",
    "vfat",
    "exfat",
    "devtmpfs",
    "squashfs",
    "jfs",
    "reiserfs",
    "bcachefs",
}
SHARED_FS = {
    "nfs",
    "nfs4",
    "lustre",
    "gpfs",
    "beegfs",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "fuse.ceph",
    "glusterfs",
    "fuse.glusterfs",
    "panfs",
    "wekafs",
    "fuse.sshfs",
    "afs",
    "9p",
    "virtiofs",
    "fuse.juicefs",
    "fuse.s3fs",
    "orangefs",
    "pvfs2",
}
_WORD = re.compile(r"[A-Za-z0-9_.,:=@+/%-]+")  # an sbatch value that needs no shell quoting
_MEM = re.compile(r"[0-9]+[KMGT]?")
_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


@dataclass
class JobOptions:
    """The sbatch options of one sweep job; None means "from the plan" (see `fill_defaults`)."""

    nodes: int = 1
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch_args: list[str] = field(default_factory=list)
    grace_s: int = DEFAULT_GRACE_S
    max_concurrent: int | None = None
    analyze: bool = True
    force: bool = False  # `sweep run --force`: the store may be a project's own folder
    why: dict[str, str] = field(default_factory=dict)  # option -> how its default was chosen


def parse_time(text: str) -> int:
    """SLURM's time formats (minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S) -> minutes, rounded up."""
    m = _TIME.fullmatch(str(text))
    if not m:
        raise SpecError(
            f"--time = {text!r} is invalid: give a positive duration as minutes, "
            f"MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS."
        )
    days, a, b, c = m.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        secs = int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    elif c is not None:
        secs = int(a) * 3600 + int(b) * 60 + int(c)
    elif b is not None:
        secs = int(a) * 60 + int(b)
    else:
        secs = int(a) * 60
    if secs <= 0:
        raise SpecError(f"--time = {text!r} is invalid: the job needs a time above zero.")
    return math.ceil(secs / 60)


def format_minutes(minutes: int) -> str:
    days, rest = divmod(int(minutes), 1440)
    return (f"{days}-" if days else "") + f"{rest // 60:02d}:{rest % 60:02d}:00"


# -- where the store lives ----------------------------------------------------------------------


def filesystem_of(path: str, mounts_text: str | None = None) -> tuple[str, str]:
    """(filesystem type, mount point) of the mount holding `path`, from /proc/mounts; ("unknown", "") where that cannot be read (not Linux)."""
    probe = os.path.realpath(path)  # a folder not made yet is on the mount of its parent
    if mounts_text is None:
        try:
            with open("/proc/mounts", encoding="utf-8") as f:
                mounts_text = f.read()
        except OSError:
            return "unknown", ""
    best = ("unknown", "")
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = probe == point or probe.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[1]):
            best = (parts[2], point)
    return best


def check_shared(store_path: str, nodes: int, mounts_text: str | None = None) -> str:
    """A local store for a job of several nodes must be on a filesystem they all mount. Returns
    a note for the user ("" when nothing is worth saying); raises SpecError when it is local."""
    fstype, point = filesystem_of(store_path, mounts_text)
    if nodes < 2:
        return ""
    if fstype in LOCAL_FS:
        raise SpecError(
            f"--nodes = {nodes} is invalid with the store {store_path}: it is on "
            f"node-local storage ({fstype} mounted at {point}), which the other nodes "
            f"cannot see; put the store on a shared filesystem (NFS, Lustre, GPFS, "
            f"BeeGFS) or use an object-store URI such as s3://bucket/prefix."
        )
    if fstype in SHARED_FS:
        return f"the store is on {fstype} ({point}), shared between nodes"
    return (
        f"the store is on a {fstype} filesystem ({point or 'unknown mount'}), which may or may "
        f"not be shared; the sweep checks that every node sees it when it starts"
    )


# -- options and their defaults ------------------------------------------------------------------


def fill_defaults(spec, opts: JobOptions, n_todo: int) -> JobOptions:
    """The options not given, from the plan (sweeps/plans/plan.py): GPUs for the largest trial, CPUs
    and memory for the trials one node runs at once, time for the plan's compute at the spec's
    assumed throughput. Each choice is explained in `opts.why`."""
    from sweeps.plans.plan import plan_rows, totals

    r = spec.resources
    rows = plan_rows(spec)
    per_trial_cpus = r.cpus * r.workers
    share = max(((row.gpus or 1.0) for row in rows), default=1.0) * r.workers if r.uses_gpus else 0.0
    if opts.gpus_per_node is None:
        opts.gpus_per_node = max(1, math.ceil(share - 1e-9)) if r.uses_gpus else 0
        opts.why["gpus-per-node"] = (
            f"the largest trial needs {share:g} GPU" if r.uses_gpus else "the spec trains on CPUs"
        )
    if r.uses_gpus:
        at_once = max(1, int(opts.gpus_per_node / share + 1e-9)) if share else 1
        what = f"{at_once} trial(s) at once on {opts.gpus_per_node} GPU(s)"
    else:
        at_once = r.max_concurrent or 4
        what = f"{at_once} trial(s) at once" + (
            "" if r.max_concurrent else " (resources.max_concurrent unset)"
        )
    at_once = max(1, min(at_once, max(1, n_todo)))
    if opts.cpus_per_task is None:
        opts.cpus_per_task = max(1, math.ceil(per_trial_cpus * at_once))
        opts.why["cpus-per-task"] = f"{what} x {per_trial_cpus:g} CPU"
    if opts.mem is None:
        if r.uses_gpus:  # host memory: the trial's state passes through it at each checkpoint
            per = max((row.mem_gb for row in rows), default=1.0) * 1.25 + 2.0
        else:
            per = max((row.memory_bytes for row in rows), default=1e9) / 1e9
        opts.mem = f"{math.ceil(per * at_once + 2.0)}G"
        opts.why["mem"] = f"{what} x {per:.2g} GB estimated + 2 GB for Ray and the driver"
    if opts.time is None:
        t = totals(spec, rows)
        hours = t.hours / max(1, (opts.gpus_per_node if t.on_gpus else opts.cpus_per_task) * opts.nodes)
        minutes = min(24 * 60, max(30, 15 * math.ceil((hours * 60 * 1.5 + 15) / 15)))
        opts.time = format_minutes(minutes)
        opts.why["time"] = (
            f"the plan's {hours:.2g} h of compute on this allocation x1.5 + 15 min, "
            f"30 min to 24 h; a longer sweep continues by requeue"
        )
    return opts


def check_options(spec, opts: JobOptions) -> None:
    """Every option, before anything is written or submitted; SpecError names the option."""
    r = spec.resources
    if opts.nodes < 1:
        raise SpecError(f"--nodes = {opts.nodes} is invalid: a job needs at least one node.")
    if opts.gpus_per_node is not None:
        if opts.gpus_per_node < 0:
            raise SpecError(f"--gpus-per-node = {opts.gpus_per_node} is invalid: it cannot be negative.")
        if opts.gpus_per_node > 0 and not r.uses_gpus:
            raise SpecError(
                f"--gpus-per-node = {opts.gpus_per_node} is invalid: {spec.source_path} "
                f"trains on CPUs only (resources.gpus = 0); drop the option or give "
                f"the spec a GPU share."
            )
        if opts.gpus_per_node == 0 and r.uses_gpus:
            raise SpecError(
                f"--gpus-per-node = 0 is invalid: {spec.source_path} trains on GPUs "
                f"(resources.gpus = {r.gpus!r})."
            )
    if opts.cpus_per_task is not None and opts.cpus_per_task < r.cpus * r.workers:
        raise SpecError(
            f"--cpus-per-task = {opts.cpus_per_task} is invalid: each trial of "
            f"{spec.source_path} needs {r.cpus * r.workers:g} CPUs."
        )
    if opts.mem is not None and not _MEM.fullmatch(opts.mem):
        raise SpecError(
            f"--mem = {opts.mem!r} is invalid: give a size such as 16G, 4000M or 0 "
            f"(all of the node's memory)."
        )
    minutes = parse_time(opts.time) if opts.time is not None else None
    if opts.grace_s < 1 or (minutes is not None and opts.grace_s >= minutes * 60):
        raise SpecError(
            f"--grace = {opts.grace_s} is invalid: it must be at least 1 second and "
            f"shorter than the job's time."
        )
    if opts.max_concurrent is not None and opts.max_concurrent < 1:
        raise SpecError(f"--max-concurrent = {opts.max_concurrent} is invalid: it must be at least 1.")
    for name in ("partition", "account", "qos", "constraint"):
        value = getattr(opts, name)
        if value is not None and not _WORD.fullmatch(value):
            raise SpecError(
                f"--{name} = {value!r} is invalid: it may hold only letters, digits "
                f"and _.,:=@+/%- (no spaces)."
            )
    for arg in opts.sbatch_args:
        sbatch_value("--sbatch-arg", arg)
        if not arg.startswith("--"):
            raise SpecError(
                f"--sbatch-arg = {arg!r} is invalid: give one long sbatch option per "
                f"--sbatch-arg, such as --sbatch-arg=--exclusive or "
                f"--sbatch-arg=--mail-type=END."
            )


# -- the batch script ---------------------------------------------------------------------------

# The script itself is package data (sweeps/templates/slurm.sbatch), so shellcheck reads it as the
# shell script it is; `render` fills its @NAME@ fields, each refused or quoted for where it lands.
TEMPLATE = "slurm.sbatch"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1
# sbatch reads an #SBATCH line with its own small parser: `"` toggles quoting, `\` escapes and an
# unquoted `#` starts a comment. A value holding any of them is refused rather than guessed at.
_SBATCH_SPECIAL = ('"', "\\", "#", "'")


def check_script_value(field_name: str, value: str) -> str:
    """A value that reaches the batch script may hold no newline or other control character: in a
    `#SBATCH` comment line a newline would start a shell command of its own."""
    bad = _CONTROL.search(value)
    if bad:
        raise SpecError(
            f"{field_name} = {value!r} is invalid: it holds the control character "
            f"{bad.group()!r}, which the batch script cannot carry safely; use a value "
            f"without newlines, tabs or other control characters."
        )
    return value


def sbatch_value(field_name: str, value: str) -> str:
    """`value` as sbatch reads it on an `#SBATCH` line: double-quoted where it holds spaces,
    refused where it holds a character sbatch's line parser treats specially."""
    check_script_value(field_name, value)
    special = [c for c in _SBATCH_SPECIAL if c in value]
    if special:
        raise SpecError(
            f"{field_name} = {value!r} is invalid: an #SBATCH line cannot hold the "
            f"character {special[0]!r}; choose a value without quotes, backslashes or '#'."
        )
    return f'"{value}"' if any(c.isspace() for c in value) else value


def sbatch_lines(spec, opts: JobOptions, folder: str, cwd: str) -> list[str]:
    """The #SBATCH header: the options, requeue, the warning signal, and where output goes. Every
    value passes `sbatch_value`, whichever check it passed before."""
    # the name is cut before it is quoted, so a cut never leaves a quote open
    lines = [
        f"--job-name={sbatch_value('name', f'dw-{spec.name}'[:80])}",
        f"--nodes={int(opts.nodes)}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={int(opts.cpus_per_task)}",
    ]
    if opts.gpus_per_node:
        lines.append(f"--gpus-per-node={int(opts.gpus_per_node)}")
    if opts.mem:
        lines.append(f"--mem={sbatch_value('--mem', opts.mem)}")
    lines.append(f"--time={sbatch_value('--time', opts.time)}")
    for name in ("partition", "account", "qos", "constraint"):
        if getattr(opts, name):
            lines.append(f"--{name}={sbatch_value(f'--{name}', getattr(opts, name))}")
    # --output expands filename patterns (%j is the job id): a literal % in the folder is %%
    output = sbatch_value("--storage", folder.replace("%", "%%") + "/slurm-%j.out")
    lines += [
        "--requeue",
        f"--signal=B:USR1@{int(opts.grace_s)}",
        "--open-mode=append",
        f"--output={output}",
        f"--chdir={sbatch_value('the working folder', cwd)}",
    ]
    lines += [sbatch_value("--sbatch-arg", arg) for arg in opts.sbatch_args]
    return [f"#SBATCH {line}" for line in lines]


def _ray_executable() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "ray")
    return here if os.path.exists(here) else (shutil.which("ray") or "ray")


_FIELD = re.compile(r"@([A-Z_]+)@")  # a template field: @NAME@


def fill(template: str, fields: dict[str, str]) -> str:
    """`template` with each @NAME@ replaced by fields[NAME] in one pass over the template, so an
    inserted value is never read again (a value holding "@STORE@" stays that text). A field
    the template names and `fields` lacks, or one it never names, is a bug: no script is made."""
    named = set(_FIELD.findall(template))
    if named != fields.keys():
        raise RuntimeError(
            f"{TEMPLATE}: fields not filled {sorted(named - fields.keys())}, "
            f"filled but not in the template {sorted(fields.keys() - named)}"
        )
    return _FIELD.sub(lambda m: fields[m.group(1)], template)


def render(
    spec,
    opts: JobOptions,
    spec_path: str,
    store: str,
    folder: str,
    cwd: str | None = None,
    python: str | None = None,
    ray: str | None = None,
) -> str:
    """The batch script's text: the template with every field filled in once, each value refused
    (SpecError) or quoted for where it lands. `cwd`, `python` and `ray` default to this process's
    working folder, interpreter and the ray beside it."""
    from importlib.resources import files

    check_options(spec, opts)
    cwd = os.getcwd() if cwd is None else cwd
    flags = ["--no-analyze"] if not opts.analyze else []
    flags += ["--force"] if opts.force else []
    if opts.max_concurrent:
        flags += ["--max-concurrent", str(int(opts.max_concurrent))]
    paths = {
        "PY": ("the Python interpreter", sys.executable if python is None else python),
        "RAY": ("the ray executable", _ray_executable() if ray is None else ray),
        "SPEC": ("spec", spec_path),
        "STORE": ("--storage", store),
        "FOLDER": ("--storage (the job's script folder)", folder),
    }
    fields = {key: shlex.quote(check_script_value(*what)) for key, what in paths.items()}
    fields |= {
        "SBATCH": "\n".join(sbatch_lines(spec, opts, folder, cwd)),
        "SWEEP": repr(check_script_value("name", spec.name)),  # in a comment line
        "FLAGS": " ".join(shlex.quote(f) for f in flags),
        "GRACE": str(int(opts.grace_s)),
        "GPUS": str(int(opts.gpus_per_node or 0)),
        "CPUS": str(int(opts.cpus_per_task)),
        "PORT_LOW": str(PORT_LOW),
        "PORT_SLOTS": str(PORT_SLOTS),
        "PORT_BLOCK": str(PORT_BLOCK),
        "MAX_TEMP_LEN": str(MAX_TEMP_LEN),
    }
    return fill((files("sweeps") / "templates" / TEMPLATE).read_text(encoding="utf-8"), fields)


# -- writing and submitting ---------------------------------------------------------------------


def script_folder(location: str, name: str) -> str:
    """Where the script goes: the store's own folder, or next to where the user is for a store
    behind a URI (sbatch needs a local file)."""
    from runstore.files import is_remote, local_path

    if is_remote(location):
        return os.path.abspath(f"{name}-{SCRIPT_FOLDER}")
    return os.path.join(os.path.abspath(local_path(location)), SCRIPT_FOLDER)


def prepare_job(args: argparse.Namespace) -> tuple[Any, JobOptions, str, str, str, list[str]]:
    """Everything checked, nothing written: (spec, options with defaults, store, folder,
    script path, notes)."""
    from runstore.files import is_remote, local_path
    from sweeps.plans.spec import load_spec
    from sweeps.running.service import prepare

    opts = JobOptions(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        cpus_per_task=args.cpus_per_task,
        mem=args.mem,
        time=args.time,
        partition=args.partition,
        account=args.account,
        qos=args.qos,
        constraint=args.constraint,
        sbatch_args=list(args.sbatch_arg or ()),
        grace_s=args.grace,
        max_concurrent=args.max_concurrent,
        analyze=not args.no_analyze,
        force=args.force,
    )
    check_script_value("spec", args.spec)
    spec = load_spec(args.spec)
    check_options(spec, opts)  # the options first: they need no store
    location = args.storage or spec.storage
    check_script_value("--storage" if args.storage else f"{args.spec}: storage.path", location)
    notes = []
    if not is_remote(location):
        location = os.path.abspath(local_path(location))
        note = check_shared(location, opts.nodes)
        if note:
            notes.append(note)
    folder = script_folder(location, spec.name)
    path = os.path.join(folder, f"{spec.name}.sbatch")
    if is_remote(location):  # its script goes in the working folder, whatever the store
        where, field, instead = (
            f"the working folder {os.getcwd()!r}",
            "the working folder",
            "run it elsewhere",
        )
    elif args.storage:
        where, field, instead = f"--storage = {args.storage!r}", "--storage", "give the sweep another storage"
    else:
        where = f"{spec.source_path}: storage.path = {spec.storage!r}"
        field, instead = "storage.path", "give the sweep another storage"
    check_script_place(folder, path, where, instead)
    # every path the script will hold, before anything is written: refused here, not half-written
    sbatch_value(field, folder)
    sbatch_value("the working folder", os.getcwd())
    check_script_value("the Python interpreter", sys.executable)
    todo = prepare(spec, location, force=opts.force).todo
    if args.submit and shutil.which("sbatch") is None:
        raise SpecError(
            "--submit is invalid here: sbatch is not on PATH (run this on a SLURM "
            "login node, or write the script without --submit and copy it there)."
        )
    fill_defaults(spec, opts, len(todo))
    check_options(spec, opts)  # the defaults too (e.g. --grace against the chosen --time)
    if args.submit:
        check_partition(opts)
    return spec, opts, location, folder, path, notes


def check_script_place(folder: str, path: str, where: str, instead: str) -> None:
    """The script's folder must be a folder (or not exist yet) and the script's own name not a
    folder: checked before anything is written, naming the place that holds them (`where`) and
    what to do `instead`."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        what = "a link to a file" if os.path.islink(folder) else "a file"
        if os.path.islink(folder) and not os.path.exists(folder):
            what = "a link to nothing"
        raise SpecError(
            f"{where} is invalid: its {os.path.basename(folder)} is {what}, where the "
            f"script's folder goes; move it aside or {instead}."
        )
    if os.path.isdir(path):
        raise SpecError(
            f"{where} is invalid: {path} is a folder, where the batch script goes; move it "
            f"aside or {instead}."
        )


def _mem_mb(mem: str) -> int:
    """sbatch's --mem (a number with an optional K, M, G or T suffix; M without one) in MB."""
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    unit = mem[-1] if mem[-1] in scale else "M"
    return math.ceil(int(mem.rstrip("KMGT")) * scale[unit])


def partition_nodes(partition: str | None) -> list[tuple[int, int]]:
    """(CPUs, memory in MB) of each node of `partition` (the default partition when None), from
    sinfo; [] where sinfo cannot tell."""
    code, out = _run(["sinfo", "-h", "-N", "-o", "%P|%c|%m"])
    if code != 0:
        return []
    nodes = []
    for line in out.splitlines():
        name, cpus, mem = (line.split("|") + ["", ""])[:3]
        default = name.endswith("*")
        if (partition is None and default) or name.rstrip("*") == partition:
            try:
                nodes.append((int(cpus), int(mem)))
            except ValueError:
                continue
    return nodes


def check_partition(opts: JobOptions) -> None:
    """A job asking more CPUs or memory per node than any node of its partition has is accepted by
    SLURM and then pends for ever (reason PartitionConfig): refuse it before submitting, naming
    the numbers and the option that fits."""
    nodes = partition_nodes(opts.partition)
    if not nodes:
        return
    where = f"partition {opts.partition!r}" if opts.partition else "the default partition"
    cpus = max(c for c, _ in nodes)
    if opts.cpus_per_task and opts.cpus_per_task > cpus:
        why = opts.why.get("cpus-per-task")
        raise SpecError(
            f"--cpus-per-task = {opts.cpus_per_task} is invalid: the largest node of {where} "
            f"has {cpus} CPUs, so the job would pend for ever"
            + (f" (the default came from {why})" if why else "")
            + f"; give --cpus-per-task {cpus} or fewer, or --max-concurrent 1."
        )
    mem = max(m for _, m in nodes)
    if opts.mem and opts.mem != "0" and _mem_mb(opts.mem) > mem:
        raise SpecError(
            f"--mem = {opts.mem} is invalid: the largest node of {where} has {mem} MB of "
            f"memory, so the job would pend for ever; give --mem {mem}M or less, or "
            f"--max-concurrent 1."
        )


def write_script(path: str, text: str) -> None:
    from runstore.files import atomic_file

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with atomic_file(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


def submit(path: str, folder: str) -> str:
    """sbatch the script; the job id is appended to the folder's jobs.txt for slurm-status."""
    import datetime as _dt

    proc = subprocess.run(["sbatch", "--parsable", path], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise SpecError(f"sbatch refused {path}: {why}")
    job = proc.stdout.strip().split(";")[0]
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(os.path.join(folder, JOBS_FILE), "a", encoding="utf-8") as f:
        f.write(f"{job} {stamp}\n")
    return job


def describe(opts: JobOptions) -> list[str]:
    """The options as they will be used, each default with how it was chosen."""
    out = []
    for name in (
        "nodes",
        "gpus-per-node",
        "cpus-per-task",
        "mem",
        "time",
        "partition",
        "account",
        "qos",
        "constraint",
    ):
        value = getattr(opts, name.replace("-", "_"))
        if value is None or (name == "gpus-per-node" and not value and name not in opts.why):
            continue
        why = opts.why.get(name)
        out.append(f"  --{name} {value}" + (f"  (default: {why})" if why else ""))
    out += [f"  {a}" for a in opts.sbatch_args]
    out.append(f"  --requeue --signal=B:USR1@{opts.grace_s}  (trials checkpoint, then the job requeues)")
    return out


def cmd_slurm(args: argparse.Namespace) -> int:
    from depthwidth.clitools import OutputError, fail
    from depthwidth.config import ConfigError
    from runstore.files import StoreError
    from sweeps.backends.cluster import ClusterError

    try:
        spec, opts, store, folder, path, notes = prepare_job(args)
        # the file load_spec read (a bundled spec's own path, for a spec given by name)
        text = render(spec, opts, os.path.abspath(spec.source_path), store, folder)
        write_script(path, text)
        job = submit(path, folder) if args.submit else None
    except (SpecError, StoreError, ClusterError, ConfigError, OutputError, OSError) as exc:
        return fail(str(exc))
    print(f"sweep {spec.name!r}: sbatch options")
    print("\n".join(describe(opts)))
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {path}")
    if job is None:
        print(f"submit it with: sbatch {shlex.quote(path)}   (or rerun this with --submit)")
    else:
        print(f"submitted job {job}; results go to {store}")
        print(f"follow it with: depthwidth sweep slurm-status {shlex.quote(store)}")
    return 0


# -- state of the job and of the sweep ----------------------------------------------------------


def _run(cmd: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout if proc.returncode == 0 else proc.stderr).strip()


def job_state(job: str) -> str:
    """The job's SLURM state: squeue while it is queued or running, then sacct, then scontrol
    (which remembers a finished job for MinJobAge when accounting is off)."""
    if shutil.which("squeue") is None:
        return "unknown (squeue is not on PATH here)"
    code, out = _run(["squeue", "-h", "-j", job, "-o", "%T|%M|%l|%D|%R"])
    if code == 0 and out:
        state, used, limit, nodes, where = out.splitlines()[0].split("|", 4)
        return f"{state} for {used} of {limit} on {nodes} node(s) ({where})  [squeue]"
    code, out = _run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State,Elapsed,ExitCode"])
    if code == 0 and out:
        state, used, exit_code = out.splitlines()[-1].split("|", 2)
        return f"{state} after {used}, exit code {exit_code}  [sacct]"
    code, out = _run(["scontrol", "-o", "show", "job", job])
    if code == 0 and out:
        info = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
        return (
            f"{info.get('JobState', '?')} after {info.get('RunTime', '?')}, exit code "
            f"{info.get('ExitCode', '?')}, restarts {info.get('Restarts', '0')}  [scontrol]"
        )
    return "no longer known to SLURM (finished before its records expired; accounting is off)"


def sweep_progress(location: str) -> list[str]:
    """Trials done, started and failed, and the compute stored against the plan's."""
    from runstore.files import StoreError
    from runstore.layout import SPEC
    from runstore.store import ResultStore
    from sweeps.plans.plan import plan_rows, totals
    from sweeps.plans.spec import parse_spec
    from sweeps.running.resume import trial_dirs

    store = ResultStore(location)
    text = store.first_spec_text()
    if text is None:
        raise StoreError(
            f"store = {location!r} is invalid: it holds no {SPEC} yet (the job has "
            f"not started the sweep, or this is not a sweep's store)."
        )
    spec = parse_spec(text, store.display(SPEC))
    runs = store.runs() if store.has_runs() else None
    ids = [t.trial_id for t in spec.trials]
    stored = runs[runs["trial_id"].isin(ids)] if runs is not None else None
    n = len(ids)
    done = 0 if stored is None else int(stored["status"].isin(["ok", "diverged"]).sum())
    failed = 0 if stored is None else int((stored["status"] == "failed").sum())
    finished = set() if stored is None else set(stored["trial_id"])
    started = list(trial_dirs(store, [i for i in ids if i not in finished]))
    plan = totals(spec, plan_rows(spec))
    spent = 0.0 if stored is None else float(stored["flops"].sum())
    share = spent / plan.flops if plan.flops else 0.0
    trials = (
        f"trials: {done} done, {len(started)} started (running, or checkpointed and waiting "
        f"to resume), {failed} failed, {n - done - failed - len(started)} not started; "
        f"{n} in the sweep"
    )
    compute = f"compute: {spent:.3g} FLOPs of finished trials, of {plan.flops:.3g} planned ({share:.0%})"
    return [trials, compute]


def cmd_status(args: argparse.Namespace) -> int:
    from depthwidth.clitools import OutputError, fail
    from depthwidth.config import ConfigError
    from runstore.files import StoreError, is_remote, local_path
    from sweeps.backends.cluster import ClusterError

    location = args.store
    folder = (
        os.path.join(os.path.abspath(local_path(location)), SCRIPT_FOLDER)
        if not is_remote(location)
        else None
    )
    if args.job is not None and not re.fullmatch(r"[0-9]+(_[0-9]+)?", args.job):
        return fail(f"--job = {args.job!r} is invalid: a SLURM job id is a number, such as 12345.")
    if args.job:
        jobs = [args.job]
    else:
        try:
            with open(os.path.join(folder or "", JOBS_FILE), encoding="utf-8") as f:
                jobs = [line.split()[0] for line in f if line.strip()]
        except OSError:
            jobs = []
    try:
        progress = sweep_progress(location)
        if not jobs:
            raise StoreError(
                f"store = {location!r} is invalid: no job was submitted for it with "
                f"`depthwidth sweep slurm --submit`; give the job id with --job."
            )
    except (SpecError, StoreError, ClusterError, ConfigError, OutputError) as exc:
        return fail(str(exc))
    earlier = f" (earlier: {', '.join(jobs[:-1])})" if len(jobs) > 1 else ""
    print(f"store {location if is_remote(location) else os.path.abspath(local_path(location))}")
    print(f"SLURM job {jobs[-1]}{earlier}: {job_state(jobs[-1])}")
    print("\n".join(progress))
    return 0


# -- inside the job -----------------------------------------------------------------------------


def wait_nodes(
    address: str, nodes: int, timeout: float, head_pid: int | None = None, head_log: str | None = None
) -> int:
    """Block until `nodes` Ray nodes are alive at `address` (the batch script's barrier). Exits
    1 with a sentence when the head dies or the time runs out."""
    import socket
    import time

    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    where = f" (see {head_log})" if head_log else ""

    def head_alive() -> bool:
        if head_pid is None:
            return True
        try:
            os.kill(head_pid, 0)
            return True
        except ProcessLookupError:
            return False

    while True:  # the GCS port first: ray.init would wait on a head that is not there yet
        if not head_alive():
            print(f"depthwidth: error: the Ray head exited before it started{where}.", file=sys.stderr)
            return 1
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex((host, int(port))) == 0:
                break
        if time.monotonic() > deadline:
            print(
                f"depthwidth: error: the Ray head at {address} did not start in {timeout:g} s{where}.",
                file=sys.stderr,
            )
            return 1
        time.sleep(0.2)
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        while True:
            alive = [n for n in ray.nodes() if n.get("Alive")]
            if len(alive) >= nodes:
                print(f"depthwidth: {len(alive)} Ray node(s) joined at {address}")
                return 0
            if time.monotonic() > deadline or not head_alive():
                print(
                    f"depthwidth: error: only {len(alive)} of {nodes} Ray nodes joined at "
                    f"{address} in {timeout:g} s (see the ray-*.log files next to the script).",
                    file=sys.stderr,
                )
                return 1
            time.sleep(0.5)
    finally:
        ray.shutdown()


# -- the command line ---------------------------------------------------------------------------


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "slurm",
        help="write (and submit) a SLURM batch script that runs the sweep",
        description="Write an sbatch script into the sweep's store that starts Ray "
        "across the job's nodes and runs the sweep; with --submit, "
        "submit it. Requeued or resubmitted, the job resumes the "
        "sweep from the store (docs/cluster.md, SLURM).",
    )
    p.add_argument("spec", help="sweep spec (TOML)")
    p.add_argument("--storage", help="store location (overrides the spec); shared by all nodes")
    p.add_argument("--submit", action="store_true", help="submit the script with sbatch")
    p.add_argument("--nodes", type=int, default=1, help="nodes (default 1)")
    p.add_argument("--gpus-per-node", type=int, help="GPUs per node (default: from the plan)")
    p.add_argument("--cpus-per-task", type=int, help="CPUs per node (default: from the plan)")
    p.add_argument("--mem", help="memory per node, e.g. 64G (default: from the plan)")
    p.add_argument("--time", help="time limit, e.g. 4:00:00 or 1-00:00:00 (default: from the plan)")
    for name in ("partition", "account", "qos", "constraint"):
        p.add_argument(f"--{name}", help=f"sbatch --{name}")
    p.add_argument(
        "--sbatch-arg",
        action="append",
        metavar="--OPTION[=VALUE]",
        help="any other sbatch option, e.g. --sbatch-arg=--exclusive (repeatable)",
    )
    p.add_argument(
        "--grace",
        type=int,
        default=DEFAULT_GRACE_S,
        help=f"seconds of warning before the time limit (default {DEFAULT_GRACE_S})",
    )
    p.add_argument("--max-concurrent", type=int, help="at most N trials at once")
    p.add_argument("--no-analyze", action="store_true", help="skip the analysis at the end")
    p.add_argument(
        "--force",
        action="store_true",
        help="use a storage folder that is a project's own folder (it holds pyproject.toml or .git)",
    )
    p.set_defaults(func=cmd_slurm)

    p = sub.add_parser("slurm-status", help="a SLURM sweep job's state beside the sweep's progress")
    p.add_argument("store", help="the sweep's store folder")
    p.add_argument("--job", help="this job id instead of the last one submitted for the store")
    p.set_defaults(func=cmd_status)


def main(argv: list[str] | None = None) -> int:
    """`python -m sweeps.slurm wait-nodes ...`: used by the batch script, not by people."""
    parser = argparse.ArgumentParser(prog="python -m sweeps.slurm")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("wait-nodes")
    p.add_argument("--address", required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--head-pid", type=int)
    p.add_argument("--head-log")
    args = parser.parse_args(argv)
    return wait_nodes(args.address, args.nodes, args.timeout, args.head_pid, args.head_log)


if __name__ == "__main__":
    sys.exit(main())
