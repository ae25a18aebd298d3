#!/usr/bin/env python3
"""stagecraft: build, test and render the images declared in matrix.yaml.

    python build.py --tag 2.6.2-cpu
    python build.py --list
    python build.py render 2.6.2-cpu

See `python build.py --help` and README.md.
"""
import sys

try:
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stagecraft.cli import main
except KeyboardInterrupt:  # Ctrl-C while stagecraft's modules load (about 0.2 s): nothing began
    print("interrupted while starting: nothing was done", file=sys.stderr)
    sys.exit(130)

if __name__ == "__main__":
    import signal

    status = None
    try:
        status = main()
        # The run is over and has said so: a Ctrl-C or SIGTERM from here on (the
        # interpreter's exit restores SIGINT's default, which would end it with -2 and
        # no word) changes nothing.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except KeyboardInterrupt:
        if status is None:  # between the import and main's handler (microseconds), or a
            print("interrupted", file=sys.stderr)  # second Ctrl-C while main reported the first
            status = 130
        else:
            print("interrupted after the run ended: its result above stands", file=sys.stderr)
    sys.exit(status)
