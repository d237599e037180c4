"""Captures how a Celery release writes typed values on the wire.

    cd testdata/celeryapp
    STAMEN_TEST_BROKER=redis://127.0.0.1:PORT/0 STAMEN_TEST_BACKEND=redis://127.0.0.1:PORT/1 \
        PYTHONPATH=<celery root> /usr/bin/python3 ../celery-wire/typed/capture.py OUTDIR SUFFIX

with a worker of the same release running the sample app on the same Redis
(-E). The client (this script, Celery's own API) sends stamen.echo with a
datetime (aware and naive), a date, a time, a UUID and a Decimal (and, from
kombu 5.3 on, bytes), and stamen.fail with a datetime argument, and writes
the exact bytes: every event message about the two tasks (the PUBLISH
payloads, kombu's envelope with the base64 body, numbered in arrival order)
and the two result documents, named <what>-celery<release>-redis.json.
"""

import base64
import datetime
import decimal
import json
import os
import sys
import threading
import time
import uuid

import kombu

sys.path.insert(0, os.getcwd())  # the sample app, testdata/celeryapp
import redis
from stamen_testapp import app

out, suffix = sys.argv[1], sys.argv[2]
broker = os.environ["STAMEN_TEST_BROKER"]
backend = os.environ["STAMEN_TEST_BACKEND"]
rb, rr = redis.Redis.from_url(broker), redis.Redis.from_url(backend)

events = []
ps = rb.pubsub()
ps.psubscribe("*")
stop = threading.Event()


def listen():
    while not stop.is_set():
        m = ps.get_message(timeout=0.2)
        if m and m["type"] == "pmessage":
            events.append(m["data"])


th = threading.Thread(target=listen)
th.start()
time.sleep(0.5)

UTC = datetime.timezone.utc
kwargs = {
    "dt": datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
    "naive": datetime.datetime(2024, 1, 2, 3, 4, 5),
    "offset": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
    "d": datetime.date(2024, 1, 2),
    "t": datetime.time(3, 4, 5, 123000),
    "u": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "dec": decimal.Decimal("1.10"),
}
if tuple(int(x) for x in kombu.__version__.split(".")[:2]) >= (5, 3):
    kwargs["b"] = b"text bytes"
    kwargs["raw"] = b"\xff\x00\x01"

echo = app.send_task("stamen.echo", args=(datetime.date(2024, 1, 2),), kwargs=kwargs)
print("echo:", echo.get(timeout=30))
fail = app.send_task("stamen.fail", kwargs={"message": kwargs["dt"]})
try:
    fail.get(timeout=30)
except ValueError as e:
    print("fail:", repr(e))
time.sleep(1.5)
stop.set()
th.join()


def write(name, data):
    with open(os.path.join(out, name + "-" + suffix + ".json"), "wb") as f:
        f.write(data)


write("result-echo", rr.get("celery-task-meta-" + echo.id))
write("result-fail", rr.get("celery-task-meta-" + fail.id))
n = 0
for e in events:
    env = json.loads(e)
    if env.get("properties", {}).get("delivery_info", {}).get("exchange") != "celeryev":
        continue
    body = json.loads(base64.b64decode(env["body"]))
    kinds = {echo.id: "echo", fail.id: "fail"}
    mine = [ev["type"] + "-" + kinds[ev["uuid"]] for ev in (body if isinstance(body, list) else [body])
            if ev.get("uuid") in kinds]
    if mine:
        n += 1
        write("event-%02d-%s" % (n, "+".join(mine)), e)
print("event messages written:", n)
