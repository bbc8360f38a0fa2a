#!/usr/bin/python3
"""An independent verifier of GATOS checkpoints, Merkle proofs and proof bundles.

Written from the specifications (RFC 6962 / RFC 9162 section 2.1, C2SP
signed-note, tlog-checkpoint, tlog-cosignature, OpenSSH PROTOCOL.sshsig,
DSSE v1, git's object format) and docs/ledger-format.md, sharing no code
with the C++ implementation: Python's standard library plus Debian's
python3-cryptography for Ed25519. The tests run it against what the gatos
CLI writes.

  gatos_tlog.py bundle FILE --ledger-key KEY.pub [--witness-key VKEY]... [--min-witnesses N]
  gatos_tlog.py tree --repo DIR --checkpoint FILE --ledger-key KEY.pub
  gatos_tlog.py selftest DIR        (DIR: tests/data/tlog)

Prints "ok ..." and exits 0, or "FAIL <check>: <reason>" and exits 1.
What it does not check (the C++ verifier does): BLAKE3 hashes (job id,
Proof-Of-Execution, PoE outputs), which the standard library cannot compute.
"""
import base64
import hashlib
import json
import os
import struct
import subprocess
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class Fail(Exception):
    def __init__(self, check, reason):
        super().__init__(f"{check}: {reason}")
        self.check = check


def ed25519_ok(pub32, sig, msg):
    try:
        Ed25519PublicKey.from_public_bytes(pub32).verify(sig, msg)
        return True
    except (InvalidSignature, ValueError):
        return False


# ---- RFC 6962 / RFC 9162 ----------------------------------------------------

def leaf_hash(data):
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def mth(leaves):
    """Merkle tree hash of a list of leaf hashes, by the RFC's recursion."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def verify_inclusion(index, size, leaf, proof, root):
    """RFC 9162 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(size1, size2, proof, root1, root2):
    """RFC 9162 2.1.4.2."""
    if size1 == 0 or size1 > size2:
        return False
    if size1 == size2:
        return not proof and root1 == root2
    if not proof:
        return False
    if size1 & (size1 - 1) == 0:
        proof = [root1] + list(proof)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == root1 and sr == root2


# ---- C2SP signed notes ------------------------------------------------------

def key_id(name, sig_type, pub32):
    return hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + pub32).digest()[:4]


def parse_note(text):
    if not text.endswith("\n") or "\n\n" not in text:
        raise Fail("checkpoint", "not a signed note")
    split = text.rindex("\n\n")
    body, sigs = text[: split + 1], text[split + 2:]
    out = []
    for line in sigs.splitlines():
        if not line.startswith("\u2014 "):
            raise Fail("checkpoint", "bad signature line")
        name, b64 = line[2:].split(" ", 1)
        raw = base64.b64decode(b64, validate=True)
        out.append((name, raw[:4], raw[4:]))
    return body, out


def parse_vkey(vkey):
    name, hex_id, b64 = vkey.split("+", 2)
    raw = base64.b64decode(b64, validate=True)
    if len(raw) != 33 or key_id(name, raw[0], raw[1:]) != bytes.fromhex(hex_id):
        raise ValueError("bad verifier key " + vkey)
    return name, raw[0], raw[1:]


def open_checkpoint(note, ledger_pub, witnesses):
    body, sigs = parse_note(note)
    lines = body.split("\n")[:-1]
    origin, size, root = lines[0], int(lines[1]), base64.b64decode(lines[2], validate=True)
    if str(size) != lines[1] or len(root) != 32:
        raise Fail("checkpoint", "malformed checkpoint body")
    ledger_id = key_id(origin, 0x01, ledger_pub)
    signed = False
    cosigners = []
    for name, kid, sig in sigs:
        if name == origin and kid == ledger_id:
            if not ed25519_ok(ledger_pub, sig, body.encode()):
                raise Fail("checkpoint", "the ledger's signature does not verify")
            signed = True
        for wname, wtype, wpub in witnesses:
            if name == wname and kid == key_id(wname, wtype, wpub):
                ts = struct.unpack(">Q", sig[:8])[0]
                msg = b"cosignature/v1\ntime %d\n" % ts + body.encode()
                if len(sig) != 72 or not ed25519_ok(wpub, sig[8:], msg):
                    raise Fail("checkpoint", f"cosignature of {wname} does not verify")
                if wname not in cosigners:
                    cosigners.append(wname)
    if not signed:
        raise Fail("checkpoint", "not signed by the ledger key")
    return origin, size, root, cosigners


# ---- git objects, SSH signatures, DSSE --------------------------------------

def git_id(kind, data):
    return hashlib.sha1(b"%s %d\x00" % (kind.encode(), len(data)) + data).hexdigest()


def decode_object_batch(raw):
    if raw[:8] != b"GATOSOB1":
        raise Fail("bundle", "objects are not a GATOSOB1 batch")
    (count,), pos, objs = struct.unpack(">I", raw[8:12]), 12, {}
    for _ in range(count):
        kind = {1: "commit", 2: "tree", 3: "blob"}[raw[pos]]
        (length,) = struct.unpack(">I", raw[pos + 1: pos + 5])
        data = raw[pos + 5: pos + 5 + length]
        pos += 5 + length
        objs[git_id(kind, data)] = (kind, data)
    if pos != len(raw):
        raise Fail("bundle", "trailing bytes after the objects")
    return objs


def parse_commit(data):
    """Headers (gpgsig unfolded), message, and the signed payload."""
    head, _, message = data.partition(b"\n\n")
    headers, sig, payload_lines = [], None, []
    lines = head.split(b"\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith(b"gpgsig "):
            block = [lines[i][7:]]
            while i + 1 < len(lines) and lines[i + 1].startswith(b" "):
                i += 1
                block.append(lines[i][1:])
            sig = b"\n".join(block) + b"\n"
        else:
            payload_lines.append(lines[i])
            k, _, v = lines[i].partition(b" ")
            headers.append((k.decode(), v.decode()))
        i += 1
    payload = b"\n".join(payload_lines) + b"\n\n" + message
    return headers, message.decode(), sig, payload


def trailers(message):
    last = message.rstrip("\n").split("\n\n")[-1]
    out = {}
    for line in last.split("\n"):
        k, sep, v = line.partition(": ")
        if sep:
            out.setdefault(k, []).append(v)
    return out


def ssh_string(buf, pos):
    (n,) = struct.unpack(">I", buf[pos: pos + 4])
    return buf[pos + 4: pos + 4 + n], pos + 4 + n


def sshsig_verify(armored, message, namespace="git"):
    """OpenSSH PROTOCOL.sshsig; returns the signer's 32-byte Ed25519 key or None."""
    text = armored.decode()
    b64 = "".join(l for l in text.strip().split("\n") if not l.startswith("-----"))
    blob = base64.b64decode(b64)
    if blob[:6] != b"SSHSIG":
        return None
    pos = 10  # magic, version
    pub, pos = ssh_string(blob, pos)
    ns, pos = ssh_string(blob, pos)
    reserved, pos = ssh_string(blob, pos)
    alg, pos = ssh_string(blob, pos)
    sigblob, pos = ssh_string(blob, pos)
    ktype, kp = ssh_string(pub, 0)
    key, _ = ssh_string(pub, kp)
    stype, sp = ssh_string(sigblob, 0)
    sig, _ = ssh_string(sigblob, sp)
    if ktype != b"ssh-ed25519" or stype != b"ssh-ed25519" or ns != namespace.encode():
        return None
    h = {b"sha512": hashlib.sha512, b"sha256": hashlib.sha256}[alg](message).digest()
    signed = b"SSHSIG" + b"".join(struct.pack(">I", len(x)) + x for x in (ns, reserved, alg, h))
    return key if ed25519_ok(key, sig, signed) else None


def read_openssh_pub(path):
    with open(path) as f:
        blob = base64.b64decode(f.read().split()[1])
    ktype, pos = ssh_string(blob, 0)
    key, _ = ssh_string(blob, pos)
    if ktype != b"ssh-ed25519" or len(key) != 32:
        raise ValueError("not an ssh-ed25519 key: " + path)
    return key


def parse_tree(data):
    out, pos = [], 0
    while pos < len(data):
        sp = data.index(b" ", pos)
        nul = data.index(b"\x00", sp)
        out.append((data[pos:sp].decode(), data[sp + 1: nul].decode(), data[nul + 1: nul + 21].hex()))
        pos = nul + 21
    return out


# ---- the bundle --------------------------------------------------------------

def verify_bundle(text, ledger_pub, witnesses, min_witnesses):
    b = json.loads(text)
    if b.get("bundle") != "gatos-proof-bundle/v1":
        raise Fail("bundle", "not a gatos-proof-bundle/v1")
    objs = decode_object_batch(base64.b64decode(b["objects"]))
    origin, size, root, cosigners = open_checkpoint(b["checkpoint"], ledger_pub, witnesses)
    if len(cosigners) < min_witnesses:
        raise Fail("witness_quorum", f"{len(cosigners)} of the given witnesses cosigned; {min_witnesses} required")
    job_hex = b["job"][len("blake3:"):]
    entries = {e["role"]: e for e in b["entries"]}
    head_tree = None
    for role in ("job", "result", "head"):
        e = entries[role]
        kind, data = objs.get(e["log_commit"], (None, None))
        if kind != "commit":
            raise Fail("inclusion_" + role, "log commit not in the bundle")
        proof = [base64.b64decode(p, validate=True) for p in e["proof"]]
        if not verify_inclusion(e["index"], size, leaf_hash(data), proof, root):
            raise Fail("inclusion_" + role, "the proof does not lead to the signed root")
        headers, message, sig, payload = parse_commit(data)
        if trailers(message).get("Log-Seq") != [str(e["index"] + 1)]:
            raise Fail("log_entry_" + role, "Log-Seq is not the entry's index + 1")
        if sig is None or sshsig_verify(sig, payload) != ledger_pub:
            raise Fail("log_entry_" + role, "the log commit is not signed by the ledger key")
        parents = [v for k, v in headers if k == "parent"]
        if role == "head":
            if e["index"] != size - 1:
                raise Fail("log_entry_head", "not the checkpoint's last entry")
            head_tree = dict(headers)["tree"]
        elif b[role + "_commit"] not in parents[1:]:
            raise Fail("log_entry_" + role, f"the log commit does not record the {role} commit")
    # The job's record in the head's state index.
    cur = head_tree
    for part in ["jobs", job_hex[0], job_hex[1], job_hex[2], job_hex[3], job_hex[4:]]:
        kind, data = objs.get(cur, (None, None))
        if kind != "tree":
            raise Fail("job_record", "a state index tree is missing")
        cur = {name: oid for mode, name, oid in parse_tree(data)}.get(part)
        if cur is None:
            raise Fail("job_record", "no record of this job in the head's state index")
    record = json.loads(objs[cur][1])
    if record.get("job_commit") != b["job_commit"] or record.get("result") != b["result_commit"]:
        raise Fail("job_record", "the record does not name this job commit and this result as final")
    # The result: trailers, Attest-Sig over DSSE PAE(poe.json), the commit signature.
    kind, data = objs.get(b["result_commit"], (None, None))
    if kind != "commit":
        raise Fail("commit", "the result commit is not in the bundle")
    headers, message, sig, payload = parse_commit(data)
    t = trailers(message)
    worker = bytes.fromhex(t["Worker-Id"][0][len("ed25519:"):])
    if t.get("Job-Id") != [b["job"]]:
        raise Fail("result_job_id", "the result's Job-Id is another job")
    if [v for k, v in headers if k == "parent"][0] != b["job_commit"]:
        raise Fail("result_parent_job", "the result's first parent is not the job commit")
    tree = {name: oid for mode, name, oid in parse_tree(objs[dict(headers)["tree"]][1])}
    poe = objs[tree["poe.json"]][1]
    ptype = b"application/vnd.gatos.poe.v1+json"
    pae = b"DSSEv1 %d %s %d %s" % (len(ptype), ptype, len(poe), poe)
    if not ed25519_ok(worker, bytes.fromhex(t["Attest-Sig"][0][len("ed25519:"):]), pae):
        raise Fail("attest_sig", "Attest-Sig does not verify for Worker-Id")
    if sig is None or sshsig_verify(sig, payload) != worker:
        raise Fail("commit_signature", "the result commit is not signed by Worker-Id")
    # Every file of the tree is a PoE output of that size (BLAKE3 hashes: the
    # C++ verifier; the standard library has no BLAKE3).
    files = {}

    def walk(tree_id, prefix):
        for mode, name, oid in parse_tree(objs[tree_id][1]):
            if mode == "40000":
                walk(oid, prefix + name + "/")
            else:
                files[prefix + name] = len(objs[oid][1])

    walk(dict(headers)["tree"], "")
    files.pop("poe.json")
    listed = {o["path"]: o["size"] for o in json.loads(poe)["outputs"]}
    if files != listed:
        raise Fail("tree_matches_outputs", "the result tree is not the files poe.json lists")
    return f"ok {b['job']} {t['Status'][0]} in {origin} at tree size {size}, {len(cosigners)} cosignature(s)"


def verify_tree(repo, checkpoint, ledger_pub):
    origin, size, root, _ = open_checkpoint(checkpoint, ledger_pub, [])
    ids = subprocess.run(["git", "-C", repo, "rev-list", "--first-parent", "--reverse", "refs/gatos/log"],
                         check=True, capture_output=True, text=True).stdout.split()
    # The log's root has the first policy commit as its parent: start at Log-Seq 1.
    leaves = []
    for oid in ids:
        data = subprocess.run(["git", "-C", repo, "cat-file", "commit", oid], check=True, capture_output=True).stdout
        if not leaves and trailers(parse_commit(data)[1]).get("Log-Seq") != ["1"]:
            continue
        leaves.append(leaf_hash(data))
    if origin != "gatos/ledger/" + ids[len(ids) - len(leaves)]:
        raise Fail("checkpoint", "origin is not this ledger's first log commit")
    if size > len(leaves) or mth(leaves[:size]) != root:
        raise Fail("tree", "the checkpoint's root is not the Merkle tree hash of this log's commits")
    return f"ok {origin} at size {size}: root matches the first {size} of {len(leaves)} log commits"


def selftest(data_dir):
    """The outside vectors this project commits (tests/data/tlog)."""
    n = 0
    for sub in ("inclusion", "consistency"):
        for dirpath, _, files in os.walk(os.path.join(data_dir, "merkle", sub)):
            for f in files:
                v = json.load(open(os.path.join(dirpath, f)))
                if f == "sizes-are-equal-one-and-proof-is-empty.json":
                    continue
                try:
                    h = lambda s: base64.b64decode(s, validate=True)
                    proof = [h(p) for p in (v["proof"] or [])]
                    if sub == "inclusion":
                        ok = len(h(v["leafHash"])) == 32 and len(h(v["root"])) == 32 and verify_inclusion(
                            v["leafIdx"], v["treeSize"], h(v["leafHash"]), proof, h(v["root"]))
                    else:
                        ok = all(len(h(v[k])) == 32 for k in ("root1", "root2")) and verify_consistency(
                            v["size1"], v["size2"], proof, h(v["root1"]), h(v["root2"]))
                except Exception:
                    ok = False
                if ok == v["wantErr"]:
                    raise Fail("selftest", f"{sub}/{f}")
                n += 1
    notes = os.path.join(data_dir, "notes")
    name, t, pub = parse_vkey(open(os.path.join(notes, "peter.vkey")).read().strip())
    body, sigs = parse_note(open(os.path.join(notes, "peter_enoch.note"), encoding="utf-8").read())
    if not ed25519_ok(pub, sigs[0][2], body.encode()) or sigs[0][1] != key_id(name, t, pub):
        raise Fail("selftest", "sumdb note")
    name, t, pub = parse_vkey(open(os.path.join(notes, "c2sp_foo.vkey")).read().strip())
    body, sigs = parse_note(open(os.path.join(notes, "c2sp_foo.note"), encoding="utf-8").read())
    if not ed25519_ok(pub, sigs[0][2], body.encode()):
        raise Fail("selftest", "C2SP note")
    return f"ok {n} Merkle vectors, 2 signed notes"


def main(argv):
    args, opts = [], {"--witness-key": []}
    i = 1
    while i < len(argv):
        if argv[i].startswith("--"):
            if argv[i] == "--witness-key":
                opts["--witness-key"].append(argv[i + 1])
            else:
                opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            args.append(argv[i])
            i += 1
    try:
        if args[0] == "bundle":
            witnesses = [parse_vkey(open(w).read().strip() if os.path.exists(w) else w) for w in opts["--witness-key"]]
            print(verify_bundle(open(args[1], encoding="utf-8").read(), read_openssh_pub(opts["--ledger-key"]),
                                witnesses, int(opts.get("--min-witnesses", 0))))
        elif args[0] == "tree":
            print(verify_tree(opts["--repo"], open(opts["--checkpoint"], encoding="utf-8").read(),
                              read_openssh_pub(opts["--ledger-key"])))
        elif args[0] == "selftest":
            print(selftest(args[1]))
        else:
            print(__doc__)
            return 2
    except Fail as e:
        print(f"FAIL {e}")
        return 1
    except (KeyError, IndexError, ValueError) as e:
        print(f"FAIL bundle: malformed ({type(e).__name__}: {e})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
