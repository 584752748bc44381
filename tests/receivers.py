"""A webhook receiver for the tests (docs/hooks.md): a real HTTP endpoint on loopback,
in a thread of the test, that records every POST."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """An HTTP endpoint on loopback that records each POST; ``answers`` are the status
    codes of the first requests (then 200); ``hang`` seconds before each answer;
    ``answered`` counts the answers sent (a hanging one's, once it stops hanging). Each
    record has the time it arrived (``at``, this host's clock)."""

    def __init__(self, answers: list[int] | None = None, hang: float = 0.0, handler: type | None = None):
        self.received: list[dict] = []
        self.answered = 0
        self.answers = list(answers or [])
        self.hang = hang
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.lock:
                    outer.received.append(
                        {"headers": dict(self.headers), "raw": body, "body": json.loads(body), "at": time.time()}
                    )
                    status = outer.answers.pop(0) if outer.answers else 200
                time.sleep(outer.hang)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with outer.lock:
                    outer.answered += 1

            def log_message(self, *args):  # noqa: ANN002 - quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler or Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def bodies(self) -> list[dict]:
        with self.lock:
            return [r["body"] for r in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
