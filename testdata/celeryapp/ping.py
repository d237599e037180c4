"""Wait until Celery nodes answer a control ping.

    /usr/bin/python3 ping.py --broker URL [--timeout 60] NODE [NODE...]

NODE is a full node name (name@host). Exits 0 once every node has replied,
1 (listing the silent nodes) when the timeout passes. Standalone: it does not
import the test app, so it works with any broker URL. It takes the
broker_transport_options (a key prefix, a sentinel's master_name) of the
test app's STAMEN_TEST_CONF, as the worker does.
"""

import argparse
import json
import os
import sys
import time

from celery import Celery


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--broker", required=True)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("nodes", nargs="+")
    a = p.parse_args()

    deadline = time.monotonic() + a.timeout
    pending = set(a.nodes)
    app = Celery("stamen_ping", broker=a.broker)
    app.conf.update(accept_content=["json"], broker_connection_timeout=5)
    conf = json.loads(os.environ.get("STAMEN_TEST_CONF") or "{}")
    if "broker_transport_options" in conf:
        app.conf.broker_transport_options = conf["broker_transport_options"]
    last_error = None
    try:
        while pending and time.monotonic() < deadline:
            try:
                replies = app.control.ping(destination=sorted(pending), timeout=0.5)
            except Exception as exc:  # broker not reachable yet, connection reset...
                last_error = exc
                app.pool.force_close_all()
                time.sleep(0.5)
                continue
            for reply in replies:
                pending -= set(reply)
    finally:
        try:
            app.close()
        except Exception:
            pass
    if pending:
        msg = "no ping reply within %.0fs from: %s" % (a.timeout, " ".join(sorted(pending)))
        if last_error is not None:
            msg += " (last error: %r)" % (last_error,)
        print(msg, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
