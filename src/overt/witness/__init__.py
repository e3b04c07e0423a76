"""Witnesses: cosigners that check a log's checkpoints grow append-only (C2SP
``tlog-witness``, ``tlog-cosignature``)."""
