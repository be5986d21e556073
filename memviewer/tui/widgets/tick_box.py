"""A checkbox whose box is empty when it is off.

Textual's ``Checkbox`` draws its ``X`` whatever the value and tells on from off by colour
alone; greyed out (disabled) the two colours come close, so an off, disabled box read as
ticked (``▐X▌``). This one shows the ``X`` only while the value is True; the screen's
``.tcss`` dims a disabled one as well.
"""

from __future__ import annotations

from textual.widgets import Checkbox

TICK = "X"
EMPTY = " "


class TickBox(Checkbox):
    """``Checkbox`` with an empty box when off (the value is still the only state)."""

    # Textual reads BUTTON_INNER (a class string there) on every paint; a read-only property
    # here is what lets the glyph follow the value.
    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]
        return TICK if self.value else EMPTY
