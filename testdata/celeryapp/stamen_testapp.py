"""Sample Celery app used by stamen's integration tests (internal/testcluster).

Run it with Debian's interpreter, /usr/bin/python3 (python3-celery 5.2.6); a
python3 earlier on PATH (pyenv, a virtualenv) usually has no Celery:

    cd testdata/celeryapp
    STAMEN_TEST_BROKER=redis://127.0.0.1:6379/14 \
    STAMEN_TEST_BACKEND=redis://127.0.0.1:6379/15 \
        /usr/bin/python3 -m celery -A stamen_testapp worker -n demo@%h -E -l INFO

Environment:

    STAMEN_TEST_BROKER         broker URL (default redis://127.0.0.1:6379/0)
    STAMEN_TEST_BACKEND        result backend (default redis://127.0.0.1:6379/1);
                               "rpc://" with an amqp:// broker
    STAMEN_TEST_POOL_RESTARTS  "1" turns on worker_pool_restarts, without which
                               the pool_restart control command replies
                               {"error": "ValueError('Pool restarts not enabled')"}
    STAMEN_TEST_CONF           a JSON object of extra settings (app.conf.update),
                               e.g. secrets a test expects stamen to mask
    STAMEN_TEST_RESULT_SERIALIZER  result_serializer (default "json"), to
                               store results stamen cannot read
    STAMEN_TEST_ROUTE          "queue:exchange:routing_key": the worker knows
                               that queue as bound to that direct exchange
                               with that key (consume it with -Q queue)

Task names are explicit ("stamen.*") so they do not depend on how the module
is imported.
"""

import datetime
import decimal
import json
import os
import time
import uuid

from celery import Celery
from kombu import Exchange, Queue
from celery.contrib.abortable import AbortableTask
from celery.utils.log import get_task_logger

BROKER = os.environ.get("STAMEN_TEST_BROKER", "redis://127.0.0.1:6379/0")
BACKEND = os.environ.get("STAMEN_TEST_BACKEND", "redis://127.0.0.1:6379/1")

app = Celery("stamen_testapp", broker=BROKER, backend=BACKEND)
app.conf.update(
    # JSON only: stamen speaks JSON, and refusing pickle keeps root workers
    # from needing C_FORCE_ROOT.
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    # The client's task-sent event, the workers' task-* events, and the
    # STARTED state between RECEIVED and SUCCESS.
    task_send_sent_event=True,
    worker_send_task_events=True,
    task_track_started=True,
    result_expires=3600,
    worker_pool_restarts=os.environ.get("STAMEN_TEST_POOL_RESTARTS") == "1",
    # RabbitMQ honours message priority only on queues declared with
    # x-max-priority: workers and clients declare every queue with it (10,
    # as Celery's docs suggest). Redis ignores it: kombu keeps a list per
    # priority step whatever the queue's arguments. A queue that exists
    # without x-max-priority refuses this declaration (406
    # PRECONDITION_FAILED).
    task_queue_max_priority=10,
)
if os.environ.get("STAMEN_TEST_CONF"):
    app.conf.update(json.loads(os.environ["STAMEN_TEST_CONF"]))

if os.environ.get("STAMEN_TEST_RESULT_SERIALIZER"):
    app.conf.result_serializer = os.environ["STAMEN_TEST_RESULT_SERIALIZER"]
    # The worker reads its own stored state back before writing the next.
    app.conf.result_accept_content = ["json", app.conf.result_serializer]

if os.environ.get("STAMEN_TEST_ROUTE"):
    _q, _x, _rk = os.environ["STAMEN_TEST_ROUTE"].split(":")
    app.conf.task_queues = [
        Queue("celery"),
        Queue(_q, Exchange(_x, type="direct"), routing_key=_rk),
    ]

log = get_task_logger(__name__)


@app.task(name="stamen.add")
def add(x, y):
    return x + y


@app.task(name="stamen.sleep")
def sleep(seconds):
    time.sleep(float(seconds))
    return seconds


@app.task(name="stamen.gate")
def gate(key, fail=False, timeout=60):
    """Waits until `key` exists in the result backend's Redis (the test
    opens the gate with SET), then returns it, or with fail raises
    ValueError. Redis result backends only."""
    client = app.backend.client
    deadline = time.monotonic() + float(timeout)
    while not client.exists(key):
        if time.monotonic() > deadline:
            raise TimeoutError("gate %s never opened" % key)
        time.sleep(0.05)
    if fail:
        raise ValueError("gate " + key)
    return key


@app.task(name="stamen.fail")
def fail(message="boom"):
    raise ValueError(message)


@app.task(name="stamen.echo")
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@app.task(name="stamen.typed")
def typed(fail=False):
    """Returns (or, with fail, raises ValueError with) values that kombu 5.3+
    writes as typed JSON ({"__type__": ..., "__value__": ...}) and kombu 5.2
    as plain strings: a datetime, a date, a UUID and a Decimal."""
    dt = datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc)
    if fail:
        raise ValueError(dt)
    return {
        "dt": dt,
        "d": datetime.date(2024, 1, 2),
        "u": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "dec": decimal.Decimal("1.10"),
    }


@app.task(bind=True, base=AbortableTask, name="stamen.abortable")
def abortable(self, seconds=30, step=0.2):
    """Loops until aborted or `seconds` have passed.

    The abort flag lives in the result backend, so this only works with a
    backend the worker can read back (Redis yes, rpc:// no).
    """
    deadline = time.monotonic() + float(seconds)
    loops = 0
    while time.monotonic() < deadline:
        if self.is_aborted():
            log.warning("task %s aborted after %d loops", self.request.id, loops)
            return {"aborted": True, "loops": loops}
        loops += 1
        time.sleep(float(step))
    return {"aborted": False, "loops": loops}


@app.task(bind=True, name="stamen.retry", max_retries=3, default_retry_delay=0.5)
def retry(self, succeed_on=3):
    """Fails and retries until attempt `succeed_on` (1-based), which succeeds.

    succeed_on > max_retries + 1 ends in FAILURE after the last retry.
    """
    attempt = self.request.retries + 1
    if attempt < int(succeed_on):
        raise self.retry(exc=RuntimeError(f"attempt {attempt} failed"))
    return {"attempts": attempt}


if __name__ == "__main__":
    app.start()
