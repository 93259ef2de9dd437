"""`depthwidth design` shows its progress on stderr as the sweep does: replicates simulated of those
planned, elapsed time and an ETA; a line at most every 30 s in a log (and one as each batch is
through), one line redrawn in place on a terminal, nothing with `--quiet`; the report on stdout
is the same either way."""

from __future__ import annotations

import io
import re

from helpers import cli
from hypothesis import given, settings
from hypothesis import strategies as st
from test_design import _spec

from sweeps.designing.design_progress import LOG_EVERY_S, REFRESH_S, ReplicateProgress

LINE = re.compile(r"design: ([\d,]+)/([\d,]+) replicates simulated \| (\S+) elapsed, ETA (\S+)")


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _counts(text: str) -> list[tuple[int, int]]:
    return [(int(a.replace(",", "")), int(b.replace(",", ""))) for a, b, *_ in LINE.findall(text)]


def test_a_design_run_shows_its_replicates_in_a_log_and_none_when_quiet(tmp_path):
    spec = _spec(tmp_path, depths=[1, 2, 3], widths=[16, 32])
    args = ("design", spec, "--effects", "3", "--replicates", "2", "--bootstrap", "0", "--jobs", "1")
    shown = cli(*args)
    assert shown.returncode == 0, shown.stderr
    counts = _counts(shown.stderr)
    assert counts and counts[-1] == (4, 4), shown.stderr  # b = 3 and the null, 2 replicates each
    assert [d for d, _ in counts] == sorted(d for d, _ in counts)
    assert "\r" not in shown.stderr and "\033" not in shown.stderr  # no terminal codes in a log
    assert "replicates simulated" not in shown.stdout
    quiet = cli(*args, "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert "replicates simulated" not in quiet.stderr and "design:" not in quiet.stderr
    assert quiet.stdout == shown.stdout  # the same report: progress changes nothing else


def test_the_eta_is_the_rate_so_far_and_a_terminal_line_is_redrawn_in_place():
    clock, out = Clock(), io.StringIO()
    view = ReplicateProgress(out, tty=True, clock=clock)
    view("planned", 40)
    clock.t = 30.0
    view("done", 10)  # a quarter in 30 s: three quarters left, 90 s
    assert out.getvalue() == "\r\033[Kdesign: 10/40 replicates simulated | 0:30 elapsed, ETA 1:30"
    clock.t += REFRESH_S / 2
    view("done", 1)  # within the refresh interval: not redrawn
    assert out.getvalue().count("\r") == 1
    view.note("design: a batch's summary")  # the line is cleared, the note gets its own
    assert out.getvalue().endswith("\r\033[Kdesign: a batch's summary\n")
    clock.t = 60.0
    view("done", 29)  # the batch is through: the line is kept, what follows starts below it
    assert out.getvalue().endswith("design: 40/40 replicates simulated | 1:00 elapsed, ETA 0:00\n")


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(1, 50), min_size=1, max_size=12), min_size=1, max_size=5),
    steps=st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=40),
)
def test_a_log_gets_a_true_line_at_most_every_30_s_and_one_as_each_batch_is_through(batches, steps):
    clock, out = Clock(), io.StringIO()
    view = ReplicateProgress(out, tty=False, clock=clock)
    planned = done = 0
    stamps, ends = [], []
    k = 0
    for chunks in batches:
        view("planned", sum(chunks))
        planned += sum(chunks)
        for c in chunks:
            clock.t += steps[k % len(steps)]
            k += 1
            before = out.getvalue().count("\n")
            view("done", c)
            done += c
            if out.getvalue().count("\n") > before:
                stamps.append((clock.t, done == planned))
        ends.append((done, planned))
    lines = out.getvalue().splitlines()
    assert all(LINE.fullmatch(line) for line in lines), lines
    counts = _counts(out.getvalue())
    assert [c for c in counts if c[0] == c[1]] == ends  # each batch's end, with its true totals
    assert all(d <= p for d, p in counts) and [d for d, _ in counts] == sorted(d for d, _ in counts)
    between = [t for t, end in stamps if not end]  # lines that are not a batch's end
    assert all(b - a >= LOG_EVERY_S for a, b in zip(between, between[1:]))
