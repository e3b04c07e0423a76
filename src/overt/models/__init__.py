"""Model adapters. Import the concrete one you need; none is imported here."""

from overt.models.base import Model

__all__ = ["Model"]
