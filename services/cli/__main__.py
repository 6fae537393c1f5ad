"""``python -m services.cli``: the same as the ``casino-ledger`` console script."""

import sys

from services.cli import main

sys.exit(main())
