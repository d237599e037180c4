"""The quickstart's Celery app: tasks that succeed, fail, retry, sleep and chain.

Its broker and result backend come from $BROKER and $BACKEND, the URLs
stamen prints at start when it runs its embedded broker.
"""
import os
import time

from celery import Celery

app = Celery("tasks", broker=os.environ.get("BROKER"), backend=os.environ.get("BACKEND"))
app.conf.update(
    # Events for every task, and the task-sent event of the ones sent by
    # send.py, so that stamen shows them from the moment they are sent.
    worker_send_task_events=True,
    task_send_sent_event=True,
    # The result keeps the task's name and arguments: stamen's retry reads
    # them back.
    result_extended=True,
)


@app.task(name="tasks.add")
def add(x, y):
    return x + y


@app.task(name="tasks.fail")
def fail(message):
    raise ValueError(message)


@app.task(name="tasks.flaky", bind=True, max_retries=3, default_retry_delay=1)
def flaky(self, attempts):
    """Fails until its attempts-th run, retrying itself in between."""
    if self.request.retries + 1 < attempts:
        raise self.retry(exc=RuntimeError("attempt %d of %d" % (self.request.retries + 1, attempts)))
    return "succeeded on attempt %d" % attempts


@app.task(name="tasks.sleep")
def sleep(seconds):
    time.sleep(seconds)
    return seconds
