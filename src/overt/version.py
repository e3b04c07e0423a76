"""overt's version, in a module of its own: what overt's own modules read it from (the
package's ``__init__`` imports them, so reading it there would be an import cycle)."""

__version__ = "0.1.0"
