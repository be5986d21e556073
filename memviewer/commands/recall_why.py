"""Human output of ``recall --why`` (a turn's fate per stage) and ``recall --vs`` (A/B)."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any

import click

from memviewer.commands.common import print_table, short
from memviewer.present.why_view import stage_lines
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.api import Reader


class RerunMeter:
    """The fix search's progress (``why-not: re-run 12 of at most 60``) on one stderr line
    while a terminal watches, wiped when it ends; the counts stay for the Ctrl-C line."""

    def __init__(self) -> None:
        self.done = 0
        self.planned = 0
        self.tty = sys.stderr.isatty()
        self._shown = 0

    def __call__(self, done: int, planned: int) -> None:
        self.done, self.planned = done, planned
        if self.tty:
            line = f"why-not: re-run {done} of at most {planned}  (Ctrl-C cancels)"
            self._shown = len(line)
            sys.stderr.write("\r" + line)
            sys.stderr.flush()

    def __enter__(self) -> RerunMeter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._shown:
            sys.stderr.write("\r" + " " * self._shown + "\r")
            sys.stderr.flush()
            self._shown = 0

    def cancelled_line(self) -> str:
        if not self.done:
            return "recall --why cancelled (Ctrl-C) before its fix search; nothing reported"
        return (
            f"recall --why cancelled (Ctrl-C) after {self.done} of at most {self.planned} "
            "re-runs; no fix reported"
        )


ARROWS = {"up": "↑", "down": "↓", "same": "=", "new": "new", "dropped": "dropped"}


def human_why(why: dict[str, Any]) -> None:
    click.echo("")
    head = f"why {why['turn_id']}: "
    if why["retrieved"]:
        click.echo(head + f"retrieved at #{why['rank']}")
    else:
        click.echo(head + f"not retrieved; eliminated at {why['eliminated_at']}")
    for line in stage_lines(why):
        click.echo(line)
    if why["retrieved"]:
        return
    if why.get("fix"):
        from memviewer.contract.compare import INT_KEYS  # the request models: only --why needs them

        ints = {k: v for k, v in why["fix"].items() if k in INT_KEYS}
        weights = {k: v for k, v in why["fix"].items() if k not in INT_KEYS}
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in ints.items())
        if weights:  # no flag of their own: try them with --vs
            flags = (
                (flags + " " if flags else "")
                + "--vs '"
                + ",".join(f"{k}={v}" for k, v in weights.items())
                + "'"
            )
        click.echo(
            f"fix: {flags}  (re-run: retrieved at #{why['fix_rank']}; {plural(why['reruns'], 're-run')})"
        )
    else:
        click.echo(f"fix: none found ({plural(why.get('reruns', 0), 're-run')} of recall)")


def human_ab(svc: Reader, ab: dict[str, Any]) -> None:
    """Each turn of either side with its rank in A and B and how it moved."""
    by_id = {r["turn_id"]: r for side in ("a", "b") for r in ab[side]["results"]}
    changed = {k: v for k, v in ab["b"]["params"].items() if ab["a"]["params"].get(k) != v}
    rows = []
    for d in ab["diff"]:
        r = by_id[d["turn_id"]]
        rows.append(
            (
                d["rank_a"] or "",
                d["rank_b"] or "",
                ARROWS[d["change"]],
                short(r["session_id"], 20),
                r["index"],
                short(" ".join(str(r["content"]).split()), 60),
            )
        )
    title = "A/B: B = A with " + (", ".join(f"{k}={v}" for k, v in changed.items()) or "no change")
    print_table(("A", "B", "", "session", "idx", "snippet"), rows, title=title)
    counts = {c: sum(1 for d in ab["diff"] if d["change"] == c) for c in ARROWS}
    click.echo(
        f"{counts['up']} ↑  {counts['down']} ↓  {counts['same']} =  "
        f"{counts['new']} new  {counts['dropped']} dropped"
    )
