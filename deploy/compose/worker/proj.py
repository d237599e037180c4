"""The quickstart app of stamen's Compose examples: celery -A proj worker -E.

The broker and result backend come from CELERY_BROKER_URL and
CELERY_RESULT_BACKEND, as they do for stamen.
"""
import os
import time

from celery import Celery

app = Celery("proj", broker=os.environ.get("CELERY_BROKER_URL"), backend=os.environ.get("CELERY_RESULT_BACKEND"))
app.conf.worker_send_task_events = True
app.conf.task_send_sent_event = True


@app.task(name="proj.add")
def add(x, y):
    return x + y


@app.task(name="proj.sleep")
def sleep(seconds):
    time.sleep(seconds)
    return seconds


@app.task(name="proj.fail")
def fail(message="boom"):
    raise ValueError(message)
