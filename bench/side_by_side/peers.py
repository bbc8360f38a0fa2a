"""Submits N jobs to Celery or RQ and waits for all results; prints jobs/s.

  peers.py celery shell|noop N FILE     (workers already running)
  peers.py rq N FILE

Prints one JSON line: {"system", "task", "jobs", "seconds", "jobs_per_s",
"window_monotonic_s"}. Time runs from the first submission to the last
result, as for GATOS; the window is that span on CLOCK_MONOTONIC (Python's
time.monotonic on Linux), the clock `perf record -k CLOCK_MONOTONIC` stamps
samples with (profile_peers.sh counts only those inside it).
"""
import json
import os
import sys
import time


def celery_run(task, n, path):
    import celery_tasks
    t = celery_tasks.shell if task == "shell" else celery_tasks.noop
    start = time.monotonic()
    results = [t.delay(i, path) if task == "shell" else t.delay(i) for i in range(n)]
    for r in results:
        r.get(timeout=600)
    return start, time.monotonic()


def rq_run(n, path):
    from redis import Redis
    from rq import Queue
    import rq_tasks
    conn = Redis.from_url(os.environ["GATOS_BENCH_REDIS"])
    q = Queue("bench", connection=conn)
    start = time.monotonic()
    jobs = [q.enqueue(rq_tasks.shell, i, path, result_ttl=3600) for i in range(n)]
    registry = q.finished_job_registry
    deadline = start + 600
    while registry.count < n and time.monotonic() < deadline:
        failed = q.failed_job_registry.count
        if failed:
            sys.exit("rq: %d jobs failed" % failed)
        time.sleep(0.02)
    if registry.count < n:
        sys.exit("rq: only %d of %d jobs finished in time" % (registry.count, n))
    return start, time.monotonic()


def main():
    system = sys.argv[1]
    if system == "celery":
        task, n, path = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        start, end = celery_run(task, n, path)
    else:
        task, n, path = "shell", int(sys.argv[2]), sys.argv[3]
        start, end = rq_run(n, path)
    secs = end - start
    print(json.dumps({"system": system, "task": task, "jobs": n, "seconds": secs, "jobs_per_s": n / secs,
                      "window_monotonic_s": [start, end]}))


if __name__ == "__main__":
    main()
