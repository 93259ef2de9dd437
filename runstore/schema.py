"""One schema for every table that enters depthwidth (docs/rules.md, "One schema for tables"): a
store's runs (as a sweep writes them and `sweep results --csv` exports them), `analyze` inputs,
`sweep run --from` and `design --pilot`. Each known column has a kind and a range, in `COLUMNS`;
`check_table` coerces the numeric ones and refuses the first bad cell with one sentence naming the
file, the column, the row and the value. pandas and numpy only: no torch, no Ray.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas loads in the functions that read tables: `depthwidth train` never needs it
    import pandas as pd

from runstore.layout import OK, STATUSES
from runstore.record import (
    CHECKED_RUN_COLUMNS,
    FILLED_RUN_COLUMNS,
    LOSS,
    NUMBER_0,
    WHOLE_0,
    Column,
)

# Above 2^53 a float no longer holds every whole number, and an int64 cast wraps at 9.2e18.
MAX_WHOLE = 2**53
# A loss is a cross-entropy in nats per token. A run whose loss passes 10·ln(vocab) is marked
# diverged by the trainer (depthwidth/train.py), which stays below 200 for any vocabulary a
# computer can hold; a loss of 1e6 or more recorded as ok is a unit or data error.
MAX_LOSS = 1e6  # the sentences say 1e6
LOSS_COLUMNS = ("final_val_loss", "final_train_loss", "loss", "val_loss", "train_loss")


class TableError(ValueError):
    """A table that breaks the schema; the message names the file, column, row and value."""


def _cols(names: str, col: Column) -> dict[str, Column]:
    return dict.fromkeys(names.split(), col)


# The one table of known numeric columns: the run columns' own (runstore/record.py), then those
# of tables that are not a store's runs (curves, pilots, a user's CSV); any other column passes as
# it is (text, JSON, ...).
COLUMNS: dict[str, Column] = {
    **CHECKED_RUN_COLUMNS,
    **_cols("n_params_nonemb", NUMBER_0),
    **_cols("warmup_steps", WHOLE_0),
    **_cols("beta1 beta2 eps weight_decay min_lr_ratio grad_clip init_std step", NUMBER_0),
    **_cols("depth_alpha", Column("number", -np.inf)),
    **_cols("loss val_loss train_loss", LOSS),
    # The copying probe (depthwidth/copyprobe.py): losses and their differences, in nats per token.
    # A run may lack them (the probe runs on text only); a value present is finite and sized as
    # a loss, so a figure's axis never has to span 1e308.
    **_cols("copy_loss copy_control_loss", Column("nats", 0.0)),
    **_cols("copy_gain copy_gain_vs_control", Column("nats", -MAX_LOSS)),
}
# The `halving` column: one JSON object per halved run (sweeps/plans/halving.py's row_record, read
# by analysis/readers/halving.py), empty for a run outside any halving.
HALVING_COLUMN = "halving"
MAX_HALVING_CHARS = 100_000  # a record of 20 rungs is a few hundred characters
MAX_RUNGS = 20  # docs/rules.md, "Bounds": `[halving] rungs` from 1 to 20
# A store's rows have these numbers in every row (a failed run still has its shape and counts).
STORE_FILLED = FILLED_RUN_COLUMNS


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def cell_error(label: str, col: str, pos, value, why: str, csv: bool) -> TableError:
    """`pos`: the row's 0-based place in the file (a CSV's line is two more: the header)."""
    line = f" (line {int(pos) + 2} of the file)" if csv else ""
    return TableError(f"{label}: column '{col}' row {int(pos) + 1}{line} is {_plain(value)!r}; {why}.")


def _first(df: pd.DataFrame, bad, col: str, raw: pd.Series, why: str, label: str, csv: bool):
    bad = np.asarray(bad, bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise cell_error(label, col, df.index[i], raw.iloc[i], why, csv)


def _whole_why(c: Column) -> str:
    if c.low == 1:  # the words tests and users know for shape columns
        return "a shape column must be a whole number from 1 to 2^53"
    return f"it must be a whole number from {c.low:g} to 2^53"


def _range_why(c: Column) -> str:
    if c.low == -np.inf:
        return "it must be a finite number"
    return f"it must be a finite number {'above' if c.above else 'at least'} {c.low:g}"


def _nats_why(c: Column) -> str:
    low = f"{c.low:g}" if c.low > -MAX_LOSS else "-1e6"
    return f"the copying probe's values are finite numbers of nats per token from {low} to below 1e6"


def _numbers(raw: pd.Series) -> pd.Series:
    """The column as numbers (NaN where a cell is missing or not a number)."""
    if raw.dtype.kind in "iuf":
        return raw
    import pandas as pd

    return pd.to_numeric(
        raw.astype(object).map(lambda x: float(x) if isinstance(x, bool) else x), errors="coerce"
    )


def _check_column(df, col, c: Column, ok, filled: bool, label: str, csv: bool) -> pd.Series:
    raw = df[col]
    vals = _numbers(raw)
    v = vals.to_numpy(float)
    missing = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
    _first(df, np.isnan(v) & ~missing, col, raw, "it must be a number", label, csv)
    present = ~np.isnan(v)
    with np.errstate(invalid="ignore"):
        if c.kind == "loss":
            bad = ok & ~(np.isfinite(v) & (v > 0) & (v < MAX_LOSS))
            why = "a run with status ok must have a finite positive loss below 1e6 (nats per token)"
            _first(df, bad, col, raw, why, label, csv)
            _first(df, present & (v < 0), col, raw, "a loss is never negative", label, csv)
            return vals
        if c.kind == "nats":
            bad = present & ~(np.isfinite(v) & (v >= c.low) & (np.abs(v) < MAX_LOSS))
            _first(df, bad, col, raw, _nats_why(c), label, csv)
            return vals
        if filled:
            _first(df, ~present, col, raw, "every run of a results store has it", label, csv)
        if c.kind == "whole":
            bad = present & (~np.isfinite(v) | (v < c.low) | (v > MAX_WHOLE) | (v != np.round(v)))
            _first(df, bad, col, raw, _whole_why(c), label, csv)
        else:
            out = (v <= c.low) if c.above else (v < c.low)
            _first(df, present & (~np.isfinite(v) | out), col, raw, _range_why(c), label, csv)
    return vals


def check_table(df: pd.DataFrame, label: str, csv: bool = False, store: bool = False) -> pd.DataFrame:
    """The table with its known numeric columns as numbers, or TableError for its first bad cell.
    `df`'s index is each row's 0-based place in the file; `csv` adds the file's line to the
    message. Every row: a status among STATUSES, numbers where the column holds numbers, in range.
    Rows with status ok (every row without a status column): losses finite, above 0 and below
    MAX_LOSS. `store`: the numbers of STORE_FILLED present in every row."""
    out = df.copy()
    if "status" in out.columns:
        status = out["status"]
        bad = ~status.isin(STATUSES).to_numpy()
        why = f"expected one of {', '.join(STATUSES)}"
        _first(out, bad, "status", status, why, label, csv)
        ok = (status == OK).to_numpy()
    else:
        ok = np.ones(len(out), bool)
    for col in out.columns:
        c = COLUMNS.get(col) if isinstance(col, str) else None
        if c is not None:
            out[col] = _check_column(out, col, c, ok, store and col in STORE_FILLED, label, csv)
    if HALVING_COLUMN in out.columns:
        for pos, cell in zip(out.index, out[HALVING_COLUMN]):
            if why := halving_problem(cell):
                raise cell_error(label, HALVING_COLUMN, pos, _short(cell), why, csv)
    return out


def _short(cell):
    """A cell as a message shows it: long text cut to its first 60 characters."""
    return cell[:60] + "..." if isinstance(cell, str) and len(cell) > 60 else cell


def _whole(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= MAX_WHOLE


def _number_or_null(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def halving_problem(cell) -> str | None:
    """Why a `halving` cell is not a halving record, or None when it is one (or empty: a run
    outside any halving). A record is a JSON object with `axis` (text), `eta` (a whole number
    from 2), `rungs` (1 to 20 whole step counts, each larger than the one before), `losses`
    (a number or null per rung reached, at most one per rung) and `group` (text or a number)."""
    if cell is None or (isinstance(cell, float) and np.isnan(cell)):
        return None
    if not isinstance(cell, str):
        return "a halving record is JSON text"
    if not cell.strip():
        return None
    if len(cell) > MAX_HALVING_CHARS:
        return f"a halving record is at most {MAX_HALVING_CHARS:,} characters of JSON"
    try:
        rec = json.loads(cell)
    except RecursionError:
        return "a halving record is a JSON object, and this is nested too deeply to read"
    except ValueError:
        return "a halving record is a JSON object, and this is not JSON"
    if not isinstance(rec, dict):
        return "a halving record is a JSON object with axis, eta, rungs, losses and group"
    missing = [k for k in ("axis", "eta", "rungs", "group") if k not in rec]
    if missing:
        return (
            f"a halving record has the fields axis, eta, rungs, losses and group, and this one "
            f"lacks {', '.join(missing)}"
        )
    rungs, losses = rec["rungs"], rec.get("losses", [])
    if not isinstance(rec["axis"], str):
        return "its axis must be the name of a column"
    if not _whole(rec["eta"], 2):
        return "its eta must be a whole number of at least 2"
    if not (isinstance(rungs, list) and 1 <= len(rungs) <= MAX_RUNGS and all(_whole(s, 1) for s in rungs)):
        return f"its rungs must be a list of 1 to {MAX_RUNGS} whole step counts"
    if any(b <= a for a, b in zip(rungs, rungs[1:])):
        return "its rungs must be step counts, each larger than the one before"
    if not (isinstance(losses, list) and len(losses) <= len(rungs) and all(map(_number_or_null, losses))):
        return "its losses must be a list of at most one number per rung"
    if not isinstance(rec["group"], (str, int, float)) or isinstance(rec["group"], bool):
        return "its group must be text or a number"
    return None


def one_row_per_run(table: pd.DataFrame, label: str, csv: bool = False) -> tuple[pd.DataFrame, int]:
    """Each run once, as a store keeps it: rows repeating a trial_id (and step, in curves) with
    the same values count once; repeats that disagree are refused (TableError), because which
    one is the run cannot be told. Returns (the table, how many repeats were dropped). Without a
    trial_id column every row is its own run."""
    if "trial_id" not in table.columns:
        return table, 0
    keys = ["trial_id"] + (["step"] if "step" in table.columns else [])
    keyed = table.assign(trial_id=table["trial_id"].astype(str))
    try:
        same = keyed.duplicated(keep="first").to_numpy()
    except TypeError:  # lists or dicts (from JSON lines) compare as their text
        same = keyed.astype(str).duplicated(keep="first").to_numpy()
    clash = keyed[~same].duplicated(keys, keep=False)
    if clash.any():
        rows = keyed[~same][clash]
        first = rows.iloc[0]
        twin = rows[(rows[keys] == first[keys]).all(axis=1)].iloc[1]
        col = next(c for c in table.columns if str(first[c]) != str(twin[c]))
        at = " and step " + repr(_plain(first["step"])) if "step" in keys else ""
        lines = f" (lines {first.name + 2} and {twin.name + 2} of the file)" if csv else ""
        raise TableError(
            f"{label}: trial_id {first['trial_id']!r}{at} appears in rows "
            f"{first.name + 1} and {twin.name + 1}{lines} with different values of "
            f"column '{col}' ({_plain(first[col])!r} and {_plain(twin[col])!r}); keep one "
            f"row per run."
        )
    return table[~same], int(same.sum())
