"""Celery tasks for the side-by-side benchmark (bench/side_by_side/run.sh).

`shell` runs /bin/sh as a subprocess (one process start per job, like a
GATOS job); `noop` is Celery's best case (no process start at all). The
broker and result backend URL come from GATOS_BENCH_REDIS.
"""
import os
import subprocess

from celery import Celery

app = Celery("celery_tasks", broker=os.environ["GATOS_BENCH_REDIS"], backend=os.environ["GATOS_BENCH_REDIS"])
app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"],
                worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)


@app.task
def shell(n, path):
    subprocess.run(["/bin/sh", "-c", "echo %d >> %s" % (n, path)], check=True)
    return n


@app.task
def noop(n):
    return n
