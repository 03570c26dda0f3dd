"""Log output: human text by default, JSON Lines for log shippers (``--log-format json``)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries whose INFO lines are about their own work, not the bridge's: httpx2 logs every
# request the OAuth verifier makes (key sets, introspection) at INFO. Their warnings still show,
# and --log-level debug shows everything.
QUIET_LIBRARIES = ("httpx2", "httpcore2")


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers.

    Keys: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, and ``exception`` (the
    formatted traceback) when there is one. The message is the same text the human format shows
    (arguments already escaped by the code that logs them); JSON encoding then escapes whatever
    it must, so a line never breaks.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send the process's logs to stderr at ``level`` (``debug``...), as ``text`` or ``json``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if level.upper() != "DEBUG":
        for name in QUIET_LIBRARIES:
            logging.getLogger(name).setLevel(logging.WARNING)
