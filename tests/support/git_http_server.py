#!/usr/bin/python3
"""A private git server for tests: `git http-backend` behind HTTP basic auth.

Serves the bare repositories under --root over git's smart HTTP protocol on
127.0.0.1 (a free port, written to --port-file once listening). With --user
and --token-file every request must carry Basic auth with that user and the
file's one line; anything else gets 401. Python standard library only.

One line per request on stderr: method, path, status. The Authorization
header is never logged.
"""
import argparse
import base64
import hmac
import http.server
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--user")
    ap.add_argument("--token-file")
    args = ap.parse_args()
    expected = None
    if args.user:
        with open(args.token_file, "rb") as f:
            token = f.read().split(b"\n")[0]
        expected = b"Basic " + base64.b64encode(args.user.encode() + b":" + token)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):  # the default would not say less
            pass

        def do_GET(self):
            self.serve()

        def do_POST(self):
            self.serve()

        def reply(self, status, headers, body):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            sys.stderr.write("%s %s %d\n" % (self.command, self.path.split("?")[0], status))
            sys.stderr.flush()

        def read_body(self):
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def serve(self):
            body = self.read_body()
            if expected is not None:
                got = (self.headers.get("Authorization") or "").encode()
                if not hmac.compare_digest(got, expected):
                    self.reply(401, [("WWW-Authenticate", 'Basic realm="gatos-test"')],
                               b"authentication required\n")
                    return
            path, _, query = self.path.partition("?")
            env = {
                "PATH": "/usr/bin:/bin",
                "GIT_PROJECT_ROOT": os.path.abspath(args.root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_ADDR": "127.0.0.1",
                "REMOTE_USER": args.user or "",
            }
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            r = subprocess.run(["git", "http-backend"], input=body, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            head, _, payload = r.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = r.stdout.partition(b"\n\n")
            status, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                if not line.strip():
                    continue
                k, _, v = line.partition(":")
                if k.lower() == "status":
                    status = int(v.strip().split()[0])
                else:
                    headers.append((k.strip(), v.strip()))
            self.reply(status, headers, payload)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    sys.stderr.write("listening on 127.0.0.1:%d\n" % server.server_address[1])
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
