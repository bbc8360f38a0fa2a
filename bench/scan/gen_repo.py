#!/usr/bin/env python3
"""Writes a git fast-import stream for a synthetic repository of varied text.

Deterministic for a seed. About TARGET_MB of unique blob bytes: N files,
then commits that each rewrite part of some files (so packs have deltas, as
real histories do). A few fake, format-valid secrets are planted so the scan
has findings. Usage: gen_repo.py TARGET_MB | git fast-import --quiet
"""
import random
import sys

target = int(sys.argv[1]) if len(sys.argv) > 1 else 300
rng = random.Random(20260401)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(2, 12)))
         for _ in range(4000)]
ops = [" = ", "(", ")", ", ", " + ", ".", "; ", " == ", " -> ", ": "]
pool = []
for _ in range(30000):
    n = rng.randint(2, 12)
    line = "    " * rng.randint(0, 3)
    line += "".join(rng.choice(words) + rng.choice(ops) for _ in range(n))
    if rng.random() < 0.2:
        line += str(rng.randint(0, 10**9))
    pool.append(line + "\n")

n_files = 1000
edits_per_commit = 20
avg = max(4096, target * 1024 * 1024 // (n_files + 150 * edits_per_commit))
lines_per_file = avg // 45
out = sys.stdout.buffer


def blob(data):
    out.write(b"data %d\n" % len(data))
    out.write(data)
    out.write(b"\n")


def fake_aws():
    return "AK" + "IA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))


files = {}
for i in range(n_files):
    body = rng.choices(pool, k=rng.randint(lines_per_file // 2, lines_per_file * 3 // 2))
    files["src/m%02d/f%04d.txt" % (i % 50, i)] = ["// file %d\n" % i] + body

t = 1700000000
mark = 0


def commit(changed, msg):
    global t, mark
    t += 3600
    out.write(b"commit refs/heads/main\n")
    out.write(b"committer Bench <bench@example.invalid> %d +0000\n" % t)
    m = msg.encode()
    out.write(b"data %d\n%s\n" % (len(m), m))
    for path in changed:
        data = "".join(files[path]).encode()
        out.write(b"M 100644 inline %s\n" % path.encode())
        blob(data)
    out.write(b"\n")


paths = sorted(files)
commit(paths, "initial import")
for c in range(150):
    changed = rng.sample(paths, edits_per_commit)
    for p in changed:
        body = files[p]
        # Rewrite a slice and append, like an edit.
        a = rng.randrange(1, len(body))
        b = min(len(body), a + rng.randint(5, 60))
        body[a:b] = rng.choices(pool, k=rng.randint(5, 60))
        body.extend(rng.choices(pool, k=rng.randint(1, max(2, len(body) // 20))))
        if rng.random() < 0.01:
            body.append("aws_key = %s\n" % fake_aws())
    commit(changed, "change %d" % c)
