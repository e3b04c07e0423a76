"""Telemetry: OpenTelemetry GenAI spans from the ledger."""
