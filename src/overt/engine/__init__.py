"""The agent loop: one turn as data, run against the model, the tools, the gate and the
ledger (:mod:`.loop`), with its hooks, limits, records and resumption beside it."""
