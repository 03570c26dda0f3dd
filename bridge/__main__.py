"""``python -m bridge`` is ``mcp-bridge``."""

import sys

from ._cli.main import main

sys.exit(main())
