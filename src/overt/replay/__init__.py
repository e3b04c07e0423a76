"""Replay: recorded turns run again through the current engine, gate, hooks and
history window, answered from the record (no model is asked, no tool runs), and
each divergence from the record reported. See :mod:`overt.replay.runner`."""

from overt.replay.runner import Replayer, ReplayRefused, select_turns, verified
from overt.replay.types import Divergence, ReplaySummary, TurnReplay

__all__ = ["Divergence", "ReplayRefused", "ReplaySummary", "Replayer", "TurnReplay",
           "select_turns", "verified"]
