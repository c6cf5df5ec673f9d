"""A small stand-in for the Hugging Face hub's HTTP API, enough for huggingface_hub's
model_info(files_metadata=True) and snapshot_download: repo metadata, HEAD and GET (with Range,
so an interrupted download resumes) on /resolve/. LFS-like files (.bin, .pt, .safetensors) get
their sha256 in the metadata, as the real hub gives it."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".bin", ".pt", ".safetensors")


class FakeHub:
    def __init__(self, repos: dict[str, dict[str, bytes]], gated: set[str] = frozenset()):
        self.repos = repos
        self.gated = set(gated)
        self.requests: list[str] = []
        self.lie_about: dict[tuple[str, str], bytes] = {}  # serve other bytes than the metadata says
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def sha(repo_id: str) -> str:
        return hashlib.sha1(repo_id.encode()).hexdigest()

    def _sibling(self, name: str, data: bytes) -> dict:
        s = {"rfilename": name, "size": len(data), "blobId": hashlib.sha1(data).hexdigest()}
        if name.endswith(LFS_SUFFIXES):
            s["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 130}
        return s

    def _handler(self):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, body=b"", headers=None, head=False):
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _route(self, head: bool):
                path = unquote(urlsplit(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                if path.startswith("/api/models/"):
                    rest = path[len("/api/models/"):]
                    repo_id = "/".join(rest.split("/")[:2])
                    if repo_id in hub.gated:
                        return self._send(401, b'{"error": "gated"}', {"X-Error-Code": "GatedRepo",
                                          "X-Error-Message": "Access to model is restricted"}, head)
                    if repo_id not in hub.repos:
                        return self._send(404, b'{"error": "not found"}', {"X-Error-Code": "RepoNotFound"}, head)
                    if "/tree/" in rest:  # list_repo_tree(recursive=True)
                        tree = []
                        for n, d in sorted(hub.repos[repo_id].items()):
                            sib = hub._sibling(n, d)
                            entry = {"type": "file", "path": n, "size": len(d), "oid": sib["blobId"]}
                            if "lfs" in sib:
                                entry["lfs"] = {"size": len(d), "oid": sib["lfs"]["sha256"], "pointerSize": 130}
                            tree.append(entry)
                        return self._send(200, json.dumps(tree).encode(), {"Content-Type": "application/json"}, head)
                    info = {"id": repo_id, "modelId": repo_id, "sha": hub.sha(repo_id), "private": False,
                            "siblings": [hub._sibling(n, d) for n, d in sorted(hub.repos[repo_id].items())]}
                    return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)
                parts = path.lstrip("/").split("/")
                if len(parts) >= 5 and parts[2] == "resolve":
                    repo_id, name = "/".join(parts[:2]), "/".join(parts[4:])
                    files = hub.repos.get(repo_id, {})
                    if name not in files:
                        return self._send(404, b"", {"X-Error-Code": "EntryNotFound"}, head)
                    data = files[name]
                    etag = hashlib.sha256(data).hexdigest() if name.endswith(LFS_SUFFIXES) else hashlib.sha1(data).hexdigest()
                    headers = {"ETag": f'"{etag}"', "X-Repo-Commit": hub.sha(repo_id), "Accept-Ranges": "bytes"}
                    body = hub.lie_about.get((repo_id, name), data)
                    rng = self.headers.get("Range")
                    if rng and not head:
                        start = int(rng.split("=")[1].split("-")[0])
                        headers["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
                        return self._send(206, body[start:], headers)
                    return self._send(200, body, headers, head)
                return self._send(404, b"", {}, head)

            def do_GET(self):  # noqa: N802
                self._route(head=False)

            def do_HEAD(self):  # noqa: N802
                self._route(head=True)

        return Handler
