"""Reasoning steps: why the agent did what it did, per turn and per session."""
