#!/usr/bin/python3
"""Regenerates celery_scenarios.json: event sequences replayed through the
real celery.events.state.State (and EventReceiver.event_from_message, for the
receiver's Lamport clock), recording the resulting task records and workers.

Run with a Python that has Celery (the golden file was made with Debian's
Celery 5.2.6):  /usr/bin/python3 gen_celery_scenarios.py > celery_scenarios.json
Timestamps are not localized (localize=False): stamen keeps raw epochs.
"""
import json

import celery
from celery import Celery
from celery.events.state import State

U1 = "11111111-1111-1111-1111-111111111111"
U2 = "22222222-2222-2222-2222-222222222222"
U3 = "33333333-3333-3333-3333-333333333333"
W1, W2, CLIENT = "w1@h", "w2@h", "gen1@h"


def task(kind, uuid, ts, host=W1, clock=None, lr=None, **fields):
    e = {"type": "task-" + kind, "uuid": uuid, "hostname": host, "timestamp": ts,
         "utcoffset": 0, "pid": 100}
    if clock is not None:
        e["clock"] = clock
    e.update(fields)
    e["local_received"] = ts + 0.5 if lr is None else lr
    return e


def sent(uuid, ts, **kw):
    base = dict(name="t.add", args="(1, 2)", kwargs="{}", retries=0, root_id=uuid,
                parent_id=None, eta=None, expires=None, queue="celery", exchange="",
                routing_key="celery")
    base.update(kw)
    return task("sent", uuid, ts, host=CLIENT, clock=1, **base)


def received(uuid, ts, **kw):
    base = dict(name="t.add", args="(1, 2)", kwargs="{}", root_id=uuid, parent_id=None,
                retries=0, eta=None, expires=None)
    base.update(kw)
    return task("received", uuid, ts, **base)


def worker(kind, ts, host=W1, lr=None, clock=5, **kw):
    e = {"type": "worker-" + kind, "hostname": host, "timestamp": ts, "utcoffset": 0,
         "pid": 7, "clock": clock, "freq": 2.0, "active": 0, "processed": 3,
         "loadavg": [0.5, 0.25, 0.125], "sw_ident": "py-celery", "sw_ver": "5.2.6",
         "sw_sys": "Linux"}
    e.update(kw)
    e["local_received"] = ts + 0.25 if lr is None else lr
    return e


TB = "Traceback (most recent call last):\n  ...\nValueError: boom\n"

SCENARIOS = {
    "in order": [
        sent(U1, 10.0),
        received(U1, 10.5, clock=20),
        task("started", U1, 11.0, clock=21),
        task("succeeded", U1, 12.0, clock=22, result="3", runtime=0.75),
    ],
    "sent after received": [
        received(U1, 10.5, clock=20),
        sent(U1, 10.0),
        task("started", U1, 11.0, clock=21),
    ],
    "succeeded before received": [
        task("succeeded", U1, 12.0, clock=22, result="3", runtime=0.003647343000920955),
        received(U1, 10.5, clock=20, retries=2, eta="2026-01-01T00:00:00+00:00"),
        task("started", U1, 11.0, clock=21),
    ],
    "started after succeeded": [
        received(U1, 10.5, clock=20),
        task("succeeded", U1, 12.0, clock=22, result="'ok'", runtime=1.5),
        task("started", U1, 11.0, clock=21),
    ],
    "failure then late success": [
        received(U1, 10.0, clock=1),
        task("failed", U1, 12.0, clock=3, exception="ValueError('boom')", traceback=TB),
        task("succeeded", U1, 11.0, clock=2, result="None", runtime=0.5),
    ],
    "success then late failure": [
        task("succeeded", U1, 12.0, clock=3, result="1", runtime=0.5),
        task("failed", U1, 11.0, clock=2, exception="ValueError('boom')", traceback=TB),
    ],
    "retry cycle": [
        received(U1, 10.0, clock=1),
        task("started", U1, 10.1, clock=2),
        task("retried", U1, 10.2, clock=3, exception="RuntimeError('again')", traceback=TB),
        received(U1, 11.0, clock=4, retries=1, eta="2026-11-22T17:34:09.402187+00:00"),
        task("started", U1, 11.1, clock=5),
        task("retried", U1, 11.2, clock=6, exception="RuntimeError('again 2')", traceback=TB),
        received(U1, 12.0, clock=7, retries=2),
        task("started", U1, 12.1, clock=8),
        task("succeeded", U1, 12.2, clock=9, result="42", runtime=0.1),
    ],
    "retry after success": [
        task("succeeded", U1, 12.0, clock=3, result="1", runtime=0.5),
        task("retried", U1, 11.0, clock=2, exception="E()", traceback=TB),
    ],
    "custom states": [
        received(U1, 10.0, clock=1),
        task("progress", U1, 10.5, clock=2, result="{'done': 10}"),
        task("started", U1, 10.2, clock=3),
        task("cancelled", U1, 10.7, clock=4),
        task("succeeded", U1, 11.0, clock=5, result="1", runtime=0.5),
    ],
    "revoked and rejected": [
        received(U1, 10.0, clock=1),
        task("revoked", U1, 10.5, clock=2, terminated=True, signum=15, expired=False),
        received(U2, 10.0, clock=3),
        task("rejected", U2, 10.6, clock=4, requeue=False),
        task("started", U2, 10.7, clock=5),
    ],
    "nulls overwrite": [
        received(U1, 10.0, clock=1, eta="2026-01-01T00:00:00", expires="2026-01-02T00:00:00"),
        task("started", U1, 10.5, clock=2, eta=None, result="x"),
        task("succeeded", U1, 11.0, clock=3, result=None, runtime=None),
    ],
    "children": [
        received(U2, 10.0, clock=1, parent_id=U1, root_id=U1),
        received(U1, 9.0, clock=2),
        received(U3, 11.0, clock=3, parent_id=U1, root_id=U1),
        task("started", U2, 11.5, clock=4),
    ],
    "retry re-sends itself as its own child": [
        received(U1, 10.0, clock=1),
        task("retried", U1, 10.2, clock=2, exception="E()", traceback=TB),
        received(U1, 11.0, clock=3, retries=1, parent_id=U1),
    ],
    "missing clock and pending only": [
        sent(U1, 10.0),
        sent(U2, 10.1),
        task("started", U3, 10.2, host=W2),
        sent(U3, 10.3),
    ],
    "workers": [
        worker("online", 1.0),
        worker("heartbeat", 3.0),
        worker("heartbeat", 5.0, active=2),
        worker("heartbeat", 4.0, lr=4.1),
        worker("heartbeat", 7.0),
        worker("heartbeat", 9.0, processed=10, freq=5.0),
        task("started", U1, 9.5, host=W2, clock=40),
        task("succeeded", U1, 9.7, host=W2, clock=41, lr=100.0, result="1", runtime=0.2),
        worker("offline", 1.0, host="gone@h"),
    ],
    "worker goes offline": [
        worker("online", 1.0),
        worker("heartbeat", 3.0),
        worker("offline", 4.0, clock=9),
        worker("heartbeat", 6.0, clock=11),
        worker("offline", 7.0, clock=12),
    ],
}


def run(events):
    app = Celery(set_as_current=False)
    recv = app.events.Receiver(None, handlers={})
    state = State()
    for ev in events:
        body = dict(ev)
        lr = body.pop("local_received")
        _, body = recv.event_from_message(body, localize=False, now=lambda: lr)
        state.event(body)
    tasks = []
    for uuid, t in state.tasks.items():
        d = t.as_dict()
        d["worker"] = t.worker.hostname if t.worker is not None else None
        d["children"] = sorted(d["children"])
        tasks.append({"uuid": uuid, "json": json.dumps(d)})
    workers = [{"hostname": w.hostname, "pid": w.pid, "freq": w.freq,
                "heartbeats": list(w.heartbeats), "clock": w.clock, "active": w.active,
                "processed": w.processed, "loadavg": w.loadavg, "sw_ident": w.sw_ident,
                "sw_ver": w.sw_ver, "sw_sys": w.sw_sys}
               for w in state.workers.values()]
    return {"tasks": tasks, "workers": workers, "task_types": state.task_types()}


out = {"celery": celery.__version__, "scenarios": []}
for name, events in SCENARIOS.items():
    out["scenarios"].append({"name": name, "events": events, "want": run(events)})
print(json.dumps(out, indent=1))
