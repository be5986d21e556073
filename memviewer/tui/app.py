"""The viewer application and ``run_app(settings)`` (``memviewer`` with no arguments).

Start-up order matters for the first paint: probe the socket (cheap), open the
SQL store, paint the Sessions screen; only then host the hub and subscribe
to its events. LanceDB and the ONNX model are never imported here: the
Recall screen loads them in a thread worker on first use.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.segment import Segment
from textual import work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.color import Color
from textual.content import Content
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.widgets import Header
from textual.worker import get_current_worker

from memviewer.config import Settings
from memviewer.tui.formatting import RENDERED_UNSAFE, printable
from memviewer.tui.hub_link import HostedHub, HubStatus, decide, header_forms, hub_sources, probe
from memviewer.tui.live_feed import LiveFeed
from memviewer.tui.live_worker import follow_hub
from memviewer.tui.messages import HubChanged, HubGone, IndexLag, LiveState
from memviewer.tui.notices import lag_forms
from memviewer.tui.palette import TEXTUAL_TITLES, screen_command
from memviewer.tui.prefs import ViewerPrefs
from memviewer.tui.screens.export import ExportScreen
from memviewer.tui.screens.help import HelpScreen
from memviewer.tui.screens.import_dialog import ImportScreen
from memviewer.tui.screens.live import LiveScreen
from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.recalls import RecallsScreen
from memviewer.tui.screens.session import SessionScreen
from memviewer.tui.screens.sessions import SessionsScreen
from memviewer.tui.viewer_app import ViewerApp

if TYPE_CHECKING:  # imported lazily at run time: the first paint does not load it
    from memviewer.api import LocalService
    from memviewer.present.index_words import Embedding
    from memviewer.service import MemoryService

SOURCES_REFRESH_S = 5.0  # how often the header re-reads the hub's sources

ServiceFactory = Callable[[Settings, bool], "MemoryService"]
PAINT_REPORT_ENV = "MEMVIEWER_TUI_PAINT_REPORT"
LIVE_BACKLOG = 500
BOOT_FALLBACK_S = 1.0
HEADER_CHROME = 18  # the header's icon (8) and clock space (10) beside its title
TAKEOVER_AFTER_S = 10.0
TAKEOVER_PROBE_S = 0.5
LAG_FAST_S = 1.0  # how often the lag line is re-read while the index is behind
LAG_SLOW_S = 3.0  # and while it is not
WHO_EMBEDS_S = 10.0  # how long the answer "who embeds" (a probe of the hub) is reused


def _terminal_safe(match: re.Match[str]) -> str:
    """What a terminal would act on (or cannot encode) rather than print is zero cells wide,
    so dropping it keeps the layout; a lone surrogate is one cell, like U+FFFD."""
    return "\ufffd" if "\ud800" <= match.group() <= "\udfff" else ""


class ControlCharFilter(LineFilter):
    """The last line of defence behind ``formatting.printable``: whatever a widget renders
    (a pasted query, an exception in a toast, a view that forgot ``printable``), no escape
    sequence or bidi override reaches the terminal and no lone surrogate breaks the output."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if RENDERED_UNSAFE.search("".join([seg.text for seg in segments])) is None:
            return segments  # the common case: one C-level scan of the whole line
        return [
            seg if seg.control else Segment(RENDERED_UNSAFE.sub(_terminal_safe, seg.text), seg.style)
            for seg in segments
        ]


def _default_factory(settings: Settings, readonly: bool) -> MemoryService:
    from memviewer import paths
    from memviewer.service import MemoryService

    if readonly and not paths.db_path(settings.home_path).exists():
        readonly = False  # nothing stored yet: nothing to protect
    return MemoryService(settings, readonly=readonly)


class MemviewerApp(ViewerApp):
    """Sessions, Session, Live, Recall and Export screens over one ``MemoryService``."""

    TITLE = "memviewer"
    CSS_PATH = [
        "app.tcss",
        "sessions.tcss",
        "session.tcss",
        "live.tcss",
        "recall.tcss",
        "export.tcss",
        "recalls.tcss",
        "context.tcss",
        "annotate.tcss",
    ]
    MODES = {"sessions": SessionsScreen, "live": LiveScreen, "recall": RecallScreen, "recalls": RecallsScreen}
    DEFAULT_MODE = "sessions"
    BINDINGS = [
        Binding("1", "switch_mode('sessions')", "Sessions"),
        Binding("2", "switch_mode('live')", "Live"),
        Binding("3", "switch_mode('recall')", "Recall"),
        Binding("4", "switch_mode('recalls')", "Recalls", show=False),  # palette + help; footer unchanged
        Binding("e", "export", "Export"),
        Binding("i", "import", "Import"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        service: MemoryService | None = None,
        service_factory: ServiceFactory | None = None,
        hub: str = "auto",
        live: bool = True,
        live_cap: int = 2000,
        paint_report: str | None = None,
        hub_indexer: bool = True,
        takeover_after: float | None = TAKEOVER_AFTER_S,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.started_at = time.time()
        self.hub_status: HubStatus = decide(settings.socket_path, hub, settings)
        self._owns_service = service is None
        factory = service_factory or _default_factory
        self._factory = factory
        self.local: MemoryService = (
            service if service is not None else factory(settings, self.hub_status.role == "connected")
        )
        self.service: LocalService = self.local
        self.hosted: HostedHub | None = None
        self.hub_indexer = hub_indexer
        # A connected viewer hosts the hub itself once the one it used has not answered for
        # this long (its viewer quit); None: never, keep reconnecting.
        self.takeover_after = takeover_after
        self.live_enabled = live and self.hub_status.role in ("hosting", "connected")
        self.live_cap = live_cap
        self.feed = LiveFeed(cap=max(live_cap, 1000))
        self.paint_report = paint_report if paint_report is not None else os.environ.get(PAINT_REPORT_ENV)
        self._painted = False
        self._booted = False
        self._control_filter = ControlCharFilter()
        self.hub_line = self.hub_status.label()  # the header: the hub's state, then the index lag
        self.hub_shorter: tuple[str, ...] = (self.hub_status.short_label(),)
        self._sub_title_forms = [printable(self.hub_line)]
        self.lag_text = ""
        self.lag_forms: tuple[str, ...] = ("",)
        self.index_lag: dict[str, Any] | None = None
        self._who: tuple[float, Embedding] | None = None  # (when, who_embeds' answer); see _read_lag
        self.sub_title = printable(self.hub_line)
        self.prefs = ViewerPrefs(settings.home_path)
        if self.prefs.theme and self.prefs.theme in self.available_themes:
            self.theme = self.prefs.theme

    def set_hub_line(self, label: str, shorter: Sequence[str] = ()) -> None:
        """The header's subtitle: what the hub is doing, then the index lag (when behind).
        ``shorter``: the same said in fewer columns (shortest last); the header shows the
        longest form that fits the terminal (``format_title``)."""
        self.hub_line, self.hub_shorter = label, tuple(shorter)
        hub_forms = (label, *shorter)
        forms = [printable(f) for f in hub_forms]
        if self.lag_text:  # every hub form with the whole lag line first, then its shorter ones;
            # where none fits, the hub's state alone (it says what the home is served by)
            forms = [printable(f"{f} · {lag}") for lag in self.lag_forms for f in hub_forms] + forms
        self._sub_title_forms = forms
        self.sub_title = forms[0]

    def format_title(self, title: str, sub_title: str) -> Content:
        """Textual's title — subtitle, with the subtitle's longest form that fits the width
        (the socket path goes first, then folder paths; each source keeps its state)."""
        forms = self._sub_title_forms if sub_title == self._sub_title_forms[0] else [sub_title]
        room = self.size.width - HEADER_CHROME - cell_len(title) - 3
        fits = next((f for f in forms if cell_len(f) <= room), forms[-1])
        return super().format_title(title, fits)

    def on_resize(self) -> None:
        """The header's subtitle form follows the width (Textual re-formats it only when a
        title changes)."""
        from textual.widgets._header import HeaderTitle

        for header in self.screen.query(Header):
            for title in header.query(HeaderTitle):
                title.update(header.format_title())

    def get_line_filters(self) -> Sequence[LineFilter]:
        return [*super().get_line_filters(), self._control_filter]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's ``notify`` with markup off by default: our toasts carry ids, paths, queries
        and errors, and a ``[/]`` in one of them was a MarkupError that closed the app."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # -- lifecycle ------------------------------------------------------------
    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, lambda theme: self.prefs.set_theme(theme.name))
        # The hub (and the indexer it starts) waits for the first paint; the
        # timer covers a first screen that never reports one.
        self.set_timer(BOOT_FALLBACK_S, self._boot_once)

    def _boot_once(self) -> None:
        if self._booted:
            return
        self._booted = True
        # Everything built so far (modules, screens, styles) lives as long as the app:
        # keep it out of full garbage collections, which otherwise stall the UI ~100 ms.
        gc.freeze()
        if self.hub_status.role == "hosting":  # read in process
            self.set_interval(SOURCES_REFRESH_S, self.refresh_sources)
        elif self.hub_status.role == "connected":  # a stats call (it counts rows): less often
            self.set_interval(SOURCES_REFRESH_S * 3, self.refresh_sources)
        self.watch_index_lag()
        if self.hub_status.role == "hosting":
            self.boot_hub()
        elif self.live_enabled:
            self.start_live()
        else:
            self.feed.set_state("off", self.hub_status.label())

    @work(exclusive=True, group="hub")
    async def boot_hub(self) -> None:
        hosted = HostedHub(self.local, self.settings.socket_path, start_indexer=self.hub_indexer)
        try:
            await hosted.start()
        except Exception as exc:  # the viewer still works without a hub
            self.hub_status = HubStatus(
                "unavailable", self.settings.socket_path, f"{type(exc).__name__}: {exc}"
            )
            self.live_enabled = False
            self.feed.set_state("off", self.hub_status.label())
            self.post_message(HubChanged(self.hub_status.label(), (self.hub_status.short_label(),)))
            self.notify(printable(self.hub_status.label()), severity="warning", timeout=8, markup=False)
            return
        self.hosted = hosted
        self.post_message(HubChanged(self.hub_status.label(), (self.hub_status.short_label(),)))
        if self.live_enabled:
            self.start_live()

    def start_live(self) -> None:
        start = max(0, int(self.service.last_seq) - LIVE_BACKLOG)
        self.follow_events(start)

    @work(exclusive=True, group="live")
    async def follow_events(self, from_seq: int) -> None:
        """Long-lived subscriber: events into the feed, state changes as messages."""
        await follow_hub(
            self.settings.socket_path,
            from_seq,
            self.feed.add,
            lambda state, detail: self.post_message(LiveState(state, detail)),
            home=self.settings.home_path,
        )

    @work(thread=True, exclusive=True, group="sources")
    def refresh_sources(self) -> None:
        """The header names the hub's sources (PraisonAI folders, OTLP) and their last delivery."""
        sources = hub_sources(self.hosted, self.settings.socket_path)
        self.post_message(HubChanged(*header_forms(self.hub_status, sources)))

    @work(thread=True, exclusive=True, group="index-lag")
    def watch_index_lag(self) -> None:
        """Long-lived: read how far the vector index is behind (a count and ``state.json``,
        no LanceDB) and post ``IndexLag`` when it changes; the UI thread never reads it."""
        worker = get_current_worker()
        last: object = object()
        while not worker.is_cancelled:
            lag = self._read_lag()
            key = (
                None
                if lag is None
                else (lag["lag"], lag.get("eta_s"), lag.get("embedding"), lag.get("within_grace"))
            )
            if key != last:
                last = key
                self.post_message(IndexLag(lag))
            deadline = time.monotonic() + (LAG_FAST_S if lag and lag["lag"] > 0 else LAG_SLOW_S)
            while not worker.is_cancelled and time.monotonic() < deadline:
                time.sleep(0.1)

    def _read_lag(self) -> dict[str, Any] | None:
        """The lag (``index_lag``) and, when turns wait past the indexer's normal delay,
        who embeds them (``who_embeds``: the one answer doctor and recall give too):
        ``embedding`` (bool), ``indexer`` and ``fix``."""
        from memviewer.wire.embedding import who_embeds

        try:
            lag = self.service.index_lag()
        except Exception:  # a store being swapped (takeover) or closed at exit: next round
            return None
        if lag["lag"] > 0 and not lag["within_grace"]:
            # a probe of the hub, reused for WHO_EMBEDS_S (the lag is re-read every second);
            # a hub change forgets it; this viewer's own hub needs no probe at all
            now = time.monotonic()
            if self._who is None or now - self._who[0] > WHO_EMBEDS_S:
                own = self.hosted is not None and self.hosted.start_indexer
                self._who = (now, who_embeds(self.settings, in_process=own))
            who = self._who[1]
            lag.update(who.public(), embedding=who.indexer is not None)
        return lag

    def on_index_lag(self, message: IndexLag) -> None:
        self.index_lag = message.lag
        # A lag within the indexer's normal delay (turns published a moment ago) is not
        # shown; past it, the countdown while someone embeds, else that no indexer runs.
        lag = message.lag if message.lag and not message.lag.get("within_grace") else None
        self.lag_forms = lag_forms(lag)
        self.lag_text = self.lag_forms[0]
        self.set_hub_line(self.hub_line, self.hub_shorter)

    def on_hub_changed(self, message: HubChanged) -> None:
        self._who = None  # another hub (or none): who embeds is asked again
        self.set_hub_line(message.label, message.shorter)

    def on_live_state(self, message: LiveState) -> None:
        self.feed.set_state(message.state, message.detail)
        if self.hub_status.role != "connected":
            return
        if message.state in ("reconnecting", "failed"):
            # Never "connected" while the stream is down: say so, then see whether the hub
            # is gone for good (its viewer quit) and this viewer should host instead.
            note = (
                ""
                if self.takeover_after is None
                else f" (hosting here if it stays down {self.takeover_after:g} s)"
            )
            self.set_hub_line(
                f"hub on {self.settings.socket_path} not answering: reconnecting{note}",
                (f"hub not answering: reconnecting{note}", "hub not answering: reconnecting"),
            )
            if self.takeover_after is not None:
                self.check_takeover()
        elif message.state in ("connected", "resumed"):
            self.set_hub_line(self.hub_status.label(), (self.hub_status.short_label(),))

    @work(thread=True, exclusive=True, group="takeover")
    def check_takeover(self) -> None:
        """Probe the socket (blocking, so in a thread); when no hub answers, open the store
        writable here and hand it to the UI loop, which starts hosting on it."""
        worker = get_current_worker()
        deadline = time.monotonic() + float(self.takeover_after or 0)
        while True:  # a hub being restarted comes back within the grace: then just resume
            answer, error = probe(self.settings.socket_path)
            if answer:
                return  # a hub answers again (restarted, or another viewer took over)
            if worker.is_cancelled:
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(TAKEOVER_PROBE_S)
        if not self._owns_service:
            self.post_message(HubGone(None, error or "no hub answers"))
            return
        try:
            service = self._factory(self.settings, False)
        except Exception as exc:  # the store cannot be opened writable: keep reading, say why
            self.post_message(HubGone(None, f"cannot host: {type(exc).__name__}: {exc}"))
            return
        self.post_message(HubGone(service, error))

    def on_hub_gone(self, message: HubGone) -> None:
        if self.hub_status.role != "connected":
            if message.service is not None:
                message.service.close()
            return
        if message.service is None:  # cannot host: the truth in the header, reconnecting goes on
            self.set_hub_line(
                f"hub on {self.settings.socket_path} gone ({message.detail}); reconnecting",
                (f"hub gone ({message.detail}); reconnecting",),
            )
            return
        self.workers.cancel_group(self, "live")
        old, self.local = self.local, message.service
        self.service = self.local
        old.close()
        self.hub_status = HubStatus("hosting", self.settings.socket_path)
        self.live_enabled = True
        self.notify("the hub stopped: this viewer hosts it now", timeout=6)
        self.boot_hub()

    async def on_unmount(self) -> None:
        gc.unfreeze()  # let what this app built be collected (several apps may run in one process)
        self.workers.cancel_group(self, "live")
        self.workers.cancel_group(self, "index-lag")
        if self.hosted is not None:
            await self.hosted.close()
        if self._owns_service:
            self.service.close()

    # -- first paint (bench hook) -------------------------------------------------
    def first_paint_done(self, rows: int, total: int) -> None:
        if self._painted:
            return
        self._painted = True
        if not self.paint_report:
            self._boot_once()
            return
        report = {
            "t_paint": time.time(),
            "t_app_init": self.started_at,
            "rows": rows,
            "total": total,
            "rss_kb": _rss_kb(),
            "cpu_s": _cpu_s(),
            "heavy_loaded": sorted(m for m in ("lancedb", "onnxruntime", "pyarrow") if m in _modules()),
        }
        Path(self.paint_report).write_text(json.dumps(report), encoding="utf-8")
        self.exit()

    # -- actions ------------------------------------------------------------------
    def action_help_quit(self) -> None:
        """Ctrl+C does not quit (it copies in an input): say which key does, as plain text
        (Textual's own toast carries markup, which our markup-free toasts printed raw)."""
        keys = [k for k, b in self.active_bindings.items() if b.binding.action in ("quit", "app.quit")]
        if keys:
            self.notify(f"Press {' or '.join(keys)} to quit the app", title="Do you want to quit?")

    async def action_switch_mode(self, mode: str) -> None:
        """``1``/``2``/``3`` show that mode's own screen: a Session opened earlier (from a
        search hit or a recall result) is closed rather than shown in place of the list."""
        if isinstance(self.screen, ModalScreen):
            return
        await self.switch_mode(mode)
        while len(self.screen_stack) > 1 and not isinstance(self.screen, ModalScreen):
            await self.pop_screen()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_export(self) -> None:
        if isinstance(self.screen, ModalScreen):
            return  # from the palette over a dialog: never stack a second dialog
        current, selected = None, []
        context = getattr(self.screen, "export_context", None)
        if callable(context):
            current, selected = context()
        self.push_screen(ExportScreen(current=current, selected=selected))

    def action_import(self) -> None:
        if isinstance(self.screen, ModalScreen):
            return

        def done(imported: int | None) -> None:
            reload = getattr(self.screen, "action_reload", None)
            if imported and callable(reload):
                reload()  # the list shows the new sessions without waiting for hub events

        self.push_screen(ImportScreen(), done)

    def open_session(self, session_id: str, anchor: int | None = None, terms: tuple[str, ...] = ()) -> None:
        self.push_screen(SessionScreen(session_id, anchor=anchor, terms=terms))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette: each entry named by the action it performs (``memviewer.tui.palette``)."""
        for command in super().get_system_commands(screen):
            yield command._replace(title=TEXTUAL_TITLES.get(command.title, command.title))
        if isinstance(screen, ModalScreen):
            # Over a dialog only its own keys: switching mode would leave the dialog on the
            # sessions stack (it reappeared on 1), and Export would stack a second dialog.
            yield from self._screen_commands(screen)
            return
        yield SystemCommand(
            "Browse sessions",
            "Switch to the Sessions screen: filter, sort, search and open sessions (1)",
            partial(self.call_later, self.action_switch_mode, "sessions"),
        )
        yield SystemCommand(
            "Watch live events",
            "Switch to the Live screen: the hub's event stream as it happens (2)",
            partial(self.call_later, self.action_switch_mode, "live"),
        )
        yield SystemCommand(
            "Open recall",
            "Switch to the Recall screen: run a two-stage recall and read its trace (3)",
            partial(self.call_later, self.action_switch_mode, "recall"),
        )
        yield SystemCommand(
            "Review recorded recalls",
            "Switch to the Recalls screen: what agents, MCP, the CLI and the viewer searched and"
            " recalled, and what came back (4)",
            partial(self.switch_mode, "recalls"),
        )
        yield SystemCommand(
            "Export sessions",
            "Open the export dialog: JSON, JSONL, Markdown or PraisonAI, with redaction (e)",
            self.action_export,
        )
        yield SystemCommand(
            "Import sessions",
            "Open the import dialog: PraisonAI files or a memviewer JSON export, with progress (i)",
            self.action_import,
        )
        yield SystemCommand("Show key bindings", "List every key of every screen (?)", self.action_help)
        yield from self._screen_commands(screen)

    def _screen_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        for binding in getattr(screen, "BINDINGS", []):
            if isinstance(binding, Binding) and binding.description:
                title, help_text = screen_command(
                    type(screen).__name__,
                    binding.action,
                    binding.description,
                    binding.key_display or binding.key,
                )
                yield SystemCommand(
                    title, help_text, partial(self.call_later, screen.run_action, binding.action)
                )


def _modules() -> Iterable[str]:
    import sys

    return sys.modules.keys()


def _cpu_s() -> float:
    """CPU seconds this process used so far (less sensitive to a busy machine than wall time)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_kb() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def run_app(settings: Settings, **kwargs: Any) -> None:
    """Open the viewer; hosts the hub when none answers on ``settings.socket_path``."""
    MemviewerApp(settings, **kwargs).run()
    from memviewer.index.indexer import exit_past_busy_indexer

    exit_past_busy_indexer(lambda note: print(f"memviewer: {note}", file=sys.stderr))
