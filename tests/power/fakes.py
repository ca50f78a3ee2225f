"""Stand-ins shared by the power and disk nemesis unit tests."""

from __future__ import annotations


class Events:
    """A NemesisRecorder that keeps what it is given: (f, value) pairs."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def nemesis(self, f: str, value: dict) -> None:
        self.events.append((f, value))
