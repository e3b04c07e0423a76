"""Telemetry: OpenTelemetry GenAI spans from the ledger and from live events."""
