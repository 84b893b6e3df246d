"""``python -m mutile``: the same as the ``mutile`` command."""
import sys

from .cli import main

sys.exit(main())
