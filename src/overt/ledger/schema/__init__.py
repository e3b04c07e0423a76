"""Numbered migrations, one module per backend, with the same meaning on both."""
