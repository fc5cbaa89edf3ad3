"""`python -m loop_agents.view <run_dir> [--out DIR] [--tokenizer PATH] [--serve [--port N]] [--force]`."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from loop_agents.view.serve import start_server
from loop_agents.view.site import build_site


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loop_agents.view", description=__doc__)
    parser.add_argument("run_dir", help="run directory written by the training driver")
    parser.add_argument("--out", default=None, help="site folder (default: <run_dir>/viewer)")
    parser.add_argument("--tokenizer", default=None, help="tokenizer path or name: show every token, shaded")
    parser.add_argument("--force", action="store_true", help="re-render every page, changed or not")
    parser.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 until interrupted")
    parser.add_argument("--port", type=int, default=8765, help="port for --serve (0 picks a free one)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        index = build_site(args.run_dir, args.out, args.tokenizer, force=args.force)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {index}")
    if args.serve:
        server = start_server(index.parent, args.port)
        print(f"serving on http://127.0.0.1:{server.server_address[1]}/index.html (Ctrl-C to stop)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
