"""What the clicks tab says when a layer it uses is removed, and when it stays silent.

``viewer.close()`` removes every layer before it closes the window, so an exit would otherwise
print one "was removed" line per plugin layer to the terminal. The news is therefore said at the
event loop's next turn, and dropped if the dock was closed meanwhile (the window went with the
layers); a layer the user removes from a viewer that stays open is still reported.
"""

from __future__ import annotations

from collections.abc import Callable

from qtpy.QtCore import QTimer


def image_removed(name: str) -> str:
    """The message when the annotated image layer ``name`` left the viewer."""
    return (f"The image layer '{name}' was removed; its pending results were discarded. "
            "Pick another image.")


def prompt_layer_removed(name: str) -> str:
    """The message when the prompt layer ``name`` (points or boxes) left the viewer."""
    return f"'{name}' was removed; choose the image in the widget again to get a new one."


def say_unless_closing(say: Callable[[str], None], closed: Callable[[], bool],
                       message: str) -> None:
    """Call ``say(message)`` at the event loop's next turn unless ``closed()`` is then True."""
    QTimer.singleShot(0, lambda: None if closed() else say(message))
