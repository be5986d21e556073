"""How the command palette words its entries: each title is the action it performs, verb
first ("Open recall", "Sort sessions"), and its help says what happens.

The footer and the help screen keep the bindings' short descriptions ("Sort", "Back");
the palette is searched by what one wants done, so it names the action instead. A screen
key the table does not know still shows (its description), and a test fails on it.
"""

from __future__ import annotations

# The first word of every palette title is one of these (tests/tui/test_app_hub.py checks).
VERBS = frozenset(
    {
        "Add", "Apply", "Browse", "Cancel", "Change", "Clear", "Close", "Confirm", "Copy", "Decline",
        "Delete", "Edit", "Explain", "Export", "Filter", "Find", "Focus", "Follow", "Go", "Hide",
        "Import", "Jump", "Mark", "Maximize", "Minimize", "Open", "Pause", "Quit", "Re-run",
        "Reload", "Reverse", "Review", "Run", "Save", "Search", "Show", "Sort", "Switch", "Tag",
        "Toggle", "Watch",
    }
)  # fmt: skip

# Textual's own entries, re-worded the same way (title -> new title).
TEXTUAL_TITLES = {"Theme": "Change theme", "Keys": "Show keys", "Screenshot": "Save screenshot"}

# (screen class name, binding action) -> (title, what happens)
SCREEN_COMMANDS: dict[tuple[str, str], tuple[str, str]] = {
    ("AnnotateScreen", "cancel"): ("Cancel the edit", "Close the dialog without saving"),
    ("AnnotateScreen", "save"): ("Save tags and note", "Store the tags and the note, close the dialog"),
    ("ConfirmScreen", "answer(True)"): ("Confirm", "Answer yes: go ahead"),
    ("ConfirmScreen", "answer(False)"): ("Decline", "Answer no: nothing changes"),
    ("ContextScreen", "app.pop_screen"): ("Go back", "Close the Context view"),
    ("ContextScreen", "step(-1)"): ("Show the previous call", "Step to the LLM call before this one"),
    ("ContextScreen", "step(1)"): ("Show the next call", "Step to the LLM call after this one"),
    ("ContextScreen", "why"): (
        "Explain why it was not recalled",
        "Re-run the item's recall on the Recall screen with the turn marked expected",
    ),
    ("ExportScreen", "close"): ("Close the export dialog", "Nothing is written"),
    ("ExportScreen", "export"): ("Export", "Write the chosen sessions in the chosen format"),
    ("FindScreen", "cancel"): ("Cancel the find", "Close the dialog; the find stays as it was"),
    ("GoldenScreen", "app.pop_screen"): ("Go back", "Close the golden cases"),
    ("GoldenScreen", "evaluate"): ("Run the golden eval", "Score every golden case against recall now"),
    ("GoldenScreen", "reload"): ("Reload golden cases", "Read the golden cases again"),
    ("HelpScreen", "close"): ("Close help", "Back to the screen"),
    ("ImportScreen", "close"): ("Close the import dialog", "Nothing is imported"),
    ("ImportScreen", "start"): ("Import", "Start importing the chosen files, with progress"),
    ("JumpScreen", "cancel"): ("Cancel go-to", "Close the dialog; the cursor stays"),
    ("LiveScreen", "toggle_pause"): ("Pause or resume", "Hold new events back, or show them again"),
    ("LiveScreen", "clear"): ("Clear the event log", "Forget the events shown so far"),
    ("LiveScreen", "follow"): ("Follow new events", "Scroll to the newest event and keep up"),
    ("LiveScreen", "focus_kinds"): ("Filter events by kind", "Show only kinds that start with what you type"),
    ("LiveScreen", "focus_session"): ("Filter events by session", "Show only sessions whose id holds it"),
    ("LiveScreen", "focus_log"): ("Focus the event log", "Move the keyboard back to the log"),
    ("RecallScreen", "focus_query"): ("Edit the query", "Move the keyboard to the query"),
    ("RecallScreen", "rerun"): ("Re-run recall", "Run the query again with the parameters shown"),
    ("RecallScreen", "cycle_mode"): ("Switch recall mode", "Flat, hierarchical, or both side by side"),
    ("RecallScreen", "next_tab"): ("Show the next tab", "Results, stage 1, post-filter, trace, compare"),
    ("RecallScreen", "copy_command"): ("Copy as CLI command", "The `memviewer recall` line for this recall"),
    ("RecallScreen", "copy_json"): ("Copy the result JSON", "The whole recall result, as `--json` prints it"),
    ("RecallScreen", "focus_results"): ("Focus the results", "Move the keyboard to the result list"),
    ("RecallScreen", "apply_fix"): (
        "Apply the why-not fix",
        "Re-run with the parameters that recall the turn",
    ),
    ("RecallScreen", "add_golden"): ("Add a golden case", "Keep this query and its expected turns"),
    ("RecallScreen", "golden"): ("Show golden history", "The golden cases and their scores over time"),
    ("RecallScreen", "cancel_why"): ("Cancel why-not", "Forget the expected turn"),
    ("RecallEntryScreen", "rerun"): (
        "Re-run this recall now",
        "Run the logged recall again on today's memory",
    ),
    ("RecallEntryScreen", "open_caller"): ("Open the caller's session", "The session that asked for it"),
    ("RecallEntryScreen", "context"): ("Show the LLM call that followed", "Open its Context view"),
    ("RecallEntryScreen", "app.pop_screen"): ("Go back", "Back to the recall log"),
    ("RecallsScreen", "reload"): ("Reload the recall log", "Read the recorded recalls again"),
    ("RecallsScreen", "focus_source"): ("Filter recalls by source", "Agents, MCP, the CLI or the viewer"),
    ("RecallsScreen", "focus_table"): ("Focus the list", "Move the keyboard to the recall list"),
    ("SessionScreen", "back"): ("Go back", "Clear an active find first, else back to the sessions"),
    ("SessionScreen", "cycle_view"): ("Switch the turn view", "Active, archived, or both side by side"),
    ("SessionScreen", "jump"): ("Go to a turn", "Jump to a turn by its index"),
    ("SessionScreen", "find"): ("Find words in the session", "Highlight them; n / p move between matches"),
    ("SessionScreen", "next(1)"): ("Jump to the next match or episode", "The next match while a find is on"),
    ("SessionScreen", "next(-1)"): ("Jump to the previous match or episode", "Back one match or one episode"),
    ("SessionScreen", "expand_all"): ("Toggle expanded turns", "Unfold or fold every turn and tool call"),
    ("SessionScreen", "bookends"): ("Toggle bookends", "Show or hide the first and last messages"),
    ("SessionScreen", "copy_turn"): ("Copy the turn", "To the clipboard (OSC 52: works over SSH)"),
    ("SessionScreen", "session_markdown('copy')"): ("Copy the session as Markdown", "To the clipboard"),
    ("SessionScreen", "open_turn"): ("Open the turn in $PAGER", "The turn's whole text"),
    ("SessionScreen", "session_markdown('pager')"): ("Open the session in $PAGER", "As Markdown"),
    ("SessionScreen", "session_markdown('editor')"): ("Open the session in $EDITOR", "As Markdown"),
    ("SessionScreen", "reload"): ("Reload the session", "Read its turns again"),
    ("SessionScreen", "mark_expected"): (
        "Mark the turn expected",
        "Ask the Recall screen why it was not recalled",
    ),
    ("SessionScreen", "context"): ("Show the LLM call after the turn", "Open its Context view"),
    ("SessionScreen", "annotate_turn"): ("Tag or note the turn", "Edit the turn's tags and note"),
    ("SessionScreen", "annotate_session"): ("Tag or note the session", "Edit the session's tags and note"),
    ("SessionsScreen", "open"): ("Open the session", "The highlighted one (a search hit opens at its turn)"),
    ("SessionsScreen", "focus_filter"): ("Filter sessions", "Narrow the list as you type"),
    ("SessionsScreen", "focus_search"): ("Search sessions", "Keyword search over every turn"),
    ("SessionsScreen", "cycle_sort"): ("Sort sessions", "By the next column"),
    ("SessionsScreen", "reverse"): ("Reverse the order", "Flip the sort"),
    ("SessionsScreen", "mark"): ("Mark for export", "Add or remove the highlighted session"),
    ("SessionsScreen", "page(1)"): ("Show the next page", "The next page of sessions"),
    ("SessionsScreen", "page(-1)"): ("Show the previous page", "The page of sessions before"),
    ("SessionsScreen", "delete"): ("Delete the session", "For good, after asking"),
    ("SessionsScreen", "annotate"): ("Tag or note the session", "Edit the session's tags and note"),
    ("SessionsScreen", "reload"): ("Reload sessions", "Read the list again"),
    ("SessionsScreen", "back"): ("Close hits or clear the filter", "One step per press"),
}


def screen_command(screen: str, action: str, description: str, key: str) -> tuple[str, str]:
    """(title, help) of a screen key in the palette; help ends with the key."""
    title, help_text = SCREEN_COMMANDS.get(
        (screen, action), (description, f"{screen.removesuffix('Screen')}")
    )
    return title, f"{help_text} ({key})"
