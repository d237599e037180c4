"""Sends the quickstart's tasks to the worker through $BROKER."""
from celery import chain

from tasks import add, fail, flaky, sleep

for i in range(5):
    add.delay(i, i)
fail.delay("this task fails on purpose")
fail.delay("and so does this one")
flaky.delay(3)  # fails twice, is retried, then succeeds
sleep.delay(10)  # still running when you first look
print("chain:", chain(add.s(1, 2), add.s(3), add.s(4)).delay().id)  # (1 + 2 + 3) + 4 = 10
print("sent 10 tasks and a chain of 3")
