"""The ``overt`` command line."""
