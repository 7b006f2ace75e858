"""A local LLM server on loopback that speaks the Anthropic Messages and the OpenAI chat-completions wire
formats and serves recorded responses in order (cycling): real rewrites, broken code, missing code blocks,
diffs that do not apply, 429 and 500 answers, slow answers and answers that hang past the client's timeout.

    python tests/llm_server/server.py --script tests/llm_server/scripts/softmax.json --port-file /tmp/port

A script is a JSON list; each entry is one answer:
    {"file": "softmax/split_rows.py", "preface": "why"}  the file's text in a ```python block (under recorded/)
    {"text": "..."}                                       a literal answer
    {"status": 429} / {"status": 500}                     an error status (with retry-after: 0, or "retry_after": s)
    {"delay": 2.0, ...}                                   wait first (past the client's timeout: a timeout)
"""
from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded"


def render(entry: dict) -> str:
    if "file" in entry:
        code = (RECORDED / entry["file"]).read_text()
        return f"{entry.get('preface', 'Here is a faster version.')}\n\n```python\n{code}```\n"
    return entry.get("text", "")


class RecordedLLM:
    def __init__(self, script: list[dict] | Path | str, port: int = 0):
        if not isinstance(script, list):
            script = json.loads(Path(script).read_text())
        self.script = script
        self._order = itertools.cycle(range(len(script)))
        self._lock = threading.Lock()
        self.requests: list[dict] = []  # path, headers and body of every request
        self._cache: set[str] = set()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with owner._lock:
                    owner.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    entry = owner.script[next(owner._order)]
                if entry.get("delay"):
                    time.sleep(entry["delay"])
                if entry.get("status"):
                    payload = json.dumps({"type": "error", "error": {"type": "api_error", "message": "recorded"}})
                    self._send(entry["status"], payload, {"retry-after": str(entry.get("retry_after", 0))})
                    return
                text = render(entry)
                if self.path.rstrip("/").endswith("/messages"):
                    self._send(200, json.dumps(owner._anthropic(body, text)))
                elif self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(200, json.dumps(owner._openai(body, text)))
                else:
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))

            def _send(self, status: int, payload: str, headers: dict | None = None):
                data = payload.encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _anthropic(self, body: dict, text: str) -> dict:
        content = body["messages"][-1]["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        cached_text = "".join(b["text"] for b in blocks if b.get("cache_control"))
        rest = sum(len(b["text"]) for b in blocks if not b.get("cache_control")) // 4 + 10
        with self._lock:
            hit = cached_text in self._cache
            self._cache.add(cached_text)
        usage = {"input_tokens": rest, "output_tokens": len(text) // 4 + 1,
                 "cache_read_input_tokens": len(cached_text) // 4 if hit else 0,
                 "cache_creation_input_tokens": 0 if hit else len(cached_text) // 4}
        return {"id": "msg_local", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": usage}

    def _openai(self, body: dict, text: str) -> dict:
        prompt = sum(len(m["content"]) for m in body["messages"]) // 4 + 1
        return {"id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model"), "choices": [{"index": 0, "finish_reason": "stop",
                                                          "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": len(text) // 4 + 1,
                          "total_tokens": prompt + len(text) // 4 + 1}}

    def start(self) -> RecordedLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> RecordedLLM:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    args = parser.parse_args()
    server = RecordedLLM(Path(args.script), args.port)
    if args.port_file:
        Path(args.port_file).write_text(str(server.httpd.server_address[1]))
    print(server.url, flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
