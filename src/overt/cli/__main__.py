"""``python -m overt.cli``: the ``overt`` command."""

import sys

from overt.cli.main import main

sys.exit(main())
