"""``python -m bridge`` is ``mcp-bridge``."""

import sys

from ._cli import main

sys.exit(main())
