"""What the viewer says about the index: the header's lag line and the Recall screen's
notices for escalations (``index:lagging`` from ``memviewer.recall.lagging``; any other
escalation is shown by its name, so one added later, ``index:damaged`` say, still shows)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text

from memviewer.present.index_words import NO_INDEXER_FIX
from memviewer.tui.formatting import printable
from memviewer.words import plural

INDEX_LAGGING = "index:lagging"  # memviewer.recall.lagging.INDEX_LAGGING (not imported: it is recall's)
# Escalations that are recall's own fallbacks, already in the status line and the trace.
ROUTINE_PREFIXES = ("session-retriever:",)


def human_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def lag_line(lag: Mapping[str, Any] | None) -> str:
    """``"index: 1,234 turns to embed · ETA 40 s"``, or "" when the index has caught up.

    When nothing embeds them (``embedding`` false) there is no ETA, only the fix."""
    if not lag or int(lag.get("lag") or 0) <= 0:
        return ""
    out = f"index: {plural(int(lag['lag']), 'turn')} to embed"
    if lag.get("embedding") is False:
        return out + " (no indexer runs: `memviewer reindex --catch-up`)"
    eta = lag.get("eta_s")
    return out + " · ETA " + (human_seconds(float(eta)) if isinstance(eta, int | float) else "unknown")


def lag_forms(lag: Mapping[str, Any] | None) -> tuple[str, ...]:
    """``lag_line`` and, when nothing embeds, shorter forms of it for a narrow header
    (the fix goes first, then words): the header shows the longest that fits."""
    line = lag_line(lag)
    if not line or not lag or lag.get("embedding") is not False:
        return (line,)
    n = int(lag["lag"])
    short = line.split(": `", 1)[0] + ")"
    return (line, short, f"no indexer: {plural(n, 'turn')} to embed", f"no indexer: {n:,} to embed")


def escalation_notice(diagnostics: Mapping[str, Any]) -> Text | None:
    """The notice above recall's results, or None when nothing needs saying."""
    escalations = [str(e) for e in diagnostics.get("escalations") or []]
    lines: list[Text] = []
    for esc in escalations:
        if esc == INDEX_LAGGING:
            lag = diagnostics.get("index_lag") or {}
            line = Text("⚠ the index is catching up: ", style="bold yellow")
            n = int(lag.get("lag") or 0)
            line.append(f"{plural(n, 'turn')} not embedded yet")
            eta = lag.get("eta_s")
            if isinstance(eta, int | float):
                line.append(f" (about {human_seconds(float(eta))})")
            line.append(". Recall answered with what is indexed")
            added = lag.get("keyword_results")
            if added:
                line.append(f", plus {plural(int(added), 'keyword-only result')} among the rest")
            if "indexer" in lag and lag["indexer"] is None:  # memviewer.wire.embedding.who_embeds
                line.append(f"; no indexer runs: {printable(str(lag.get('fix') or NO_INDEXER_FIX))}.")
            else:
                line.append("; re-run (ctrl+r) once it has caught up.")
            lines.append(line)
        elif not esc.startswith(ROUTINE_PREFIXES):
            line = Text("⚠ ", style="bold yellow")
            line.append(printable(esc), style="bold yellow")
            detail = diagnostics.get(esc.replace(":", "_")) or diagnostics.get(esc)
            if isinstance(detail, Mapping) and detail.get("message"):
                line.append(f": {printable(str(detail['message']))}")
            line.append(" (see the Trace tab; `memviewer doctor` checks the index)", style="dim")
            lines.append(line)
    if not lines:
        return None
    return Text("\n").join(lines)
