"""The cockpit's pages, one module each."""
