"""The exit codes of ``mcp-bridge`` and ``mcp-bridge connect``, as ``--help`` lists them.

Where one fits, a code is the sysexits.h one, so that systemd and shell scripts can tell a
setting that cannot work (78, not worth retrying) from a transient failure.
"""

EXIT_OK = 0
EXIT_FAILURE = 1  # a runtime failure (serve), or a lost connection (connect)
EXIT_LOST = 1  # connect: the connection closed or broke while the local client still used it
EXIT_USAGE = 2  # argparse's own code for a malformed command line
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE: could not connect
EXIT_CRASH_LOOP = 75  # EX_TEMPFAIL: the shared child kept crashing; systemd's policy takes over
EXIT_NOPERM = 77  # EX_NOPERM: the bridge refused our credentials (token, Origin, certificate)
EXIT_CONFIG = 78  # EX_CONFIG (sysexits.h): a setting that cannot work; systemd won't retry it
