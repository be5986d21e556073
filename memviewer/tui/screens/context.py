"""Context: what one LLM call sent the model, part by part (``memviewer calls show``).

The head names the call, the tokenizer and the window; a bar and a table give each part's
tokens and share; the messages list says each message's kind; the recalled items say
whether they reached the prompt; the diff says what entered and left since the call before.
``[`` / ``]`` step to the session's previous / next call; on a recalled item ``enter`` opens
its turn and ``w`` asks the Recall screen why it ranked where it did (its turn marked
expected, the recall's query re-run: ``recall --why``). Opened from a Session's turn
(``L``: the first call after it) and from a recall log entry (``L``: the call that followed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from memviewer.tui.formatting import one_line, printable
from memviewer.tui.messages import Loaded
from memviewer.tui.widgets.footer import CoalescedFooter

if TYPE_CHECKING:
    from memviewer.tui.viewer_app import ViewerApp

#: One colour per part, in ``memviewer.context.anatomy.KINDS`` order.
COLOURS = {
    "system_prompt": "blue",
    "compaction_summary": "magenta",
    "active_turns": "green",
    "recalled_memories": "yellow",
    "tool_results": "cyan",
    "new_user_message": "bright_white",
    "unattributed": "red",
}


def bar(parts: list[dict[str, Any]], width: int) -> Text:
    """The parts as one line of ``width`` cells, each part's cells in proportion to its tokens."""
    total = sum(p["tokens"] for p in parts)
    out = Text()
    if not total:
        return out.append("(no input)", style="dim")
    used = 0
    for p in parts:
        cells = round(p["tokens"] * width / total)
        cells = min(cells, width - used)
        if cells:
            out.append("█" * cells, style=COLOURS.get(p["kind"], "white"))
            used += cells
    return out


class ContextScreen(Screen[None]):
    if TYPE_CHECKING:
        app = getters.app(ViewerApp)

    TITLE = "Context"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("left_square_bracket", "step(-1)", "Previous call", key_display="["),
        Binding("right_square_bracket", "step(1)", "Next call", key_display="]"),
        Binding("w", "why", "Why (recall --why)"),
    ]

    def __init__(self, call_id: str) -> None:
        super().__init__()
        self.call_id = call_id
        self.data: dict[str, Any] | None = None
        self.call_ids: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="context-head")
        yield Static(id="context-bar")
        yield DataTable(id="context-parts", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="context-messages", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="context-recalled", cursor_type="row", zebra_stripes=True)
        yield Static(id="context-diff")
        yield CoalescedFooter()

    def on_mount(self) -> None:
        for table_id, cols in (
            ("#context-parts", (("Part", 20), ("Tokens", 8), ("Share", 7), ("Window", 7), ("Msgs", 5))),
            ("#context-messages", (("#", 4), ("Role", 10), ("Kind", 20), ("Tok", 6), ("Mem", 5))),
            ("#context-recalled", (("Rank", 4), ("In prompt", 9), ("By", 5), ("Turn", 14))),
        ):
            table = self.query_one(table_id, DataTable)
            for label, width in cols:
                table.add_column(label, width=width)
            if table_id != "#context-parts":
                table.add_column("Text")
        self.query_one("#context-recalled", DataTable).focus()
        self._load(self.call_id)

    @work(thread=True, exclusive=True, group="context")
    def _load(self, call_id: str) -> None:
        try:
            data = self.app.service.llm_call(call_id)
            sid = data["call"]["session_id"]
            call_ids = (
                [c["call_id"] for c in self.app.service.llm_calls(session_id=sid, limit=10_000)["calls"]]
                if sid
                else [call_id]
            )
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.post_message(Loaded("context", error=message))
            return
        self.post_message(Loaded("context", (data, call_ids)))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.kind != "context":
            return
        head = self.query_one("#context-head", Static)
        if message.error:
            head.update(Text(printable(message.error), style="bold red"))
            return
        self.data, self.call_ids = message.data
        c, a = self.data["call"], self.data["anatomy"]
        self.call_id = c["call_id"]
        pos = self.call_ids.index(self.call_id) + 1 if self.call_id in self.call_ids else 0
        text = Text()
        text.append(f"call {pos} of {len(self.call_ids)} ", style="bold")
        text.append(printable(c["call_id"]), style="dim")
        text.append(printable(f"  ·  {c['at']}  ·  model {c['model'] or '?'}"))
        if c["session_id"]:
            text.append(printable(f"  ·  session {c['session_id']}"))
        text.append(f"\n{a['input_tokens']} input tokens ({a['tokenizer']['name']})", style="dim")
        if a["reported_input_tokens"] is not None:
            text.append(f"; the model reported {a['reported_input_tokens']}", style="dim")
        text.append(
            f"; window {a['context_window']}" if a["context_window"] else f"; {a['window_note']}", style="dim"
        )
        if c["problems"]:
            text.append(printable(f"\nkept as received: {', '.join(c['problems'])}"), style="yellow")
        if a["compacted_away"]:
            text.append(
                f"\n{len(a['compacted_away'])} recalled turn(s) compaction removed never reached the prompt",
                style="bold red",
            )
        head.update(text)
        self.query_one("#context-bar", Static).update(bar(a["parts"], max(10, self.size.width - 4)))
        parts = self.query_one("#context-parts", DataTable)
        parts.clear()
        for p in a["parts"]:
            window = "" if p["share_of_window"] is None else f"{p['share_of_window']:.1%}"
            parts.add_row(
                Text("■ ", style=COLOURS[p["kind"]]) + Text(p["kind"]),
                Text(str(p["tokens"])),
                Text(f"{p['share']:.1%}"),
                Text(window),
                Text(str(p["messages"])),
                key=p["kind"],
            )
        msgs = self.query_one("#context-messages", DataTable)
        msgs.clear()
        for m in a["messages"]:
            kind = m["kind"] + (" (archived)" if m["archived"] else "")
            msgs.add_row(
                Text(str(m["position"])),
                Text(one_line(m["role"], 10)),
                Text(kind, style=COLOURS.get(m["kind"], "")),
                Text(str(m["tokens"])),
                Text(str(m["recalled_tokens"] or "")),
                Text(one_line(m.get("reason") or m["preview"], 300)),
            )
        rec = self.query_one("#context-recalled", DataTable)
        rec.clear()
        for i, r in enumerate(a["recalled"]):
            mark = {True: ("yes", "green"), False: ("NO", "bold red"), None: ("?", "yellow")}[r["in_prompt"]]
            rec.add_row(
                Text(str(r["rank"])),
                Text(mark[0], style=mark[1]),
                Text(r["matched_by"] or ""),
                Text(one_line(r.get("turn_id") or r.get("doc_id") or "-", 14)),
                Text(one_line(r["preview"], 300)),
                key=str(i),
            )
        self.query_one("#context-diff", Static).update(self._diff_text())

    def _diff_text(self) -> Text:
        d = (self.data or {}).get("diff")
        if d is None:
            return Text("the first call of its session: nothing to compare", style="dim")
        out = Text(
            f"since the call before: {len(d['entered'])} entered (+{d['entered_tokens']} tokens), "
            f"{len(d['left'])} left (-{d['left_tokens']}), {d['kept']} kept",
            style="bold",
        )
        for sign, rows, style in (("+", d["entered"], "green"), ("-", d["left"], "red")):
            for m in rows[:5]:
                out.append(
                    printable(f"\n{sign} #{m['position']} {m['kind']}: {one_line(m['preview'], 100)}"), style
                )
        return out

    def action_step(self, direction: int) -> None:
        if self.call_id not in self.call_ids:
            return
        i = self.call_ids.index(self.call_id) + direction
        if 0 <= i < len(self.call_ids):
            self._load(self.call_ids[i])
        else:
            self.notify("no further call in this session", severity="warning")

    def _current_item(self) -> dict[str, Any] | None:
        items = ((self.data or {}).get("anatomy") or {}).get("recalled") or []
        row = self.query_one("#context-recalled", DataTable).cursor_row
        return items[row] if 0 <= row < len(items) else None

    @on(DataTable.RowSelected, "#context-recalled")
    def _item_selected(self) -> None:
        item = self._current_item()
        if item is None or not item.get("session_id"):
            self.notify("this recalled item is no stored turn", severity="warning")
            return
        self.app.open_session(item["session_id"], anchor=item.get("index"))

    async def action_why(self) -> None:
        """The recall's query on the Recall screen with this item's turn marked expected."""
        from memviewer.tui.expected import expected_turns, toggle_expected
        from memviewer.tui.screens.recall_fill import fill_recall_screen

        item = self._current_item()
        if item is None or not item.get("turn_id"):
            self.notify("why needs a recalled item that is a stored turn", severity="warning")
            return
        turn = {"turn_id": item["turn_id"], "session_id": item["session_id"], "index": item.get("index")}
        if not any(m.get("turn_id") == item["turn_id"] for m in expected_turns(self.app)):
            toggle_expected(self.app, turn)
        await self.app.switch_mode("recall")
        fill_recall_screen(self.app.screen, item["query"], {})
